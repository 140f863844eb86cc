"""A deterministic fuzz of bad inputs to the public API (used by tests/fuzz/test_fuzz.py).

Every case is a call that must be refused: the library itself must raise ``ValueError`` (or
``TypeError`` for a wrong type) naming what is wrong, before doing any work. An outcome is
``clear`` (ValueError/TypeError raised from a frame of the attnsvm package), ``unclear`` (any other
exception, or one raised from inside torch, NumPy or cvxpy) or ``silent`` (no exception: a
wrong answer). ``python tests/fuzz/fuzz_inputs.py`` prints the counts by entry point and class.
"""

from __future__ import annotations

import math
import random
import traceback
from collections import Counter
from pathlib import Path
from typing import Callable

import torch

import attnsvm as A

F64 = torch.float64
PACKAGE = str(Path(A.__file__).resolve().parent)


CORRECT = object()      # what an extreme-but-valid case's thunk returns once its answer is checked


def outcome(thunk: Callable[[], object]) -> str:
    """``clear``: ValueError/TypeError raised by a ``raise`` statement of the attnsvm package (not
    by a torch/NumPy call made from it); ``correct``: a valid extreme input computed and checked;
    ``unclear``: any other exception; ``silent``: returned without error (a wrong answer)."""
    try:
        result = thunk()
    except (ValueError, TypeError) as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        ours = str(Path(frame.filename).resolve()).startswith(PACKAGE)
        return "clear" if ours and (frame.line or "").lstrip().startswith("raise") else "unclear"
    except Exception:                                            # noqa: BLE001
        return "unclear"
    return "correct" if result is CORRECT else "silent"


def checked(compute: Callable[[], object], check: Callable[[object], bool]) -> Callable[[], object]:
    """A thunk for a valid extreme input: computed correctly (``check``) or refused clearly."""
    def thunk():
        result = compute()
        return CORRECT if check(result) else result
    return thunk


NON_NUMERIC = ["abc", None, {"a": 1}, object(), [1, "x"], b"\x00"]
NON_FINITE = [math.nan, math.inf, -math.inf]


def _base(seed: int = 0):
    g = A.set_seed(seed)
    return A.random_problem(2, 3, 4, generator=g)


def _with_bad_entry(tensor: torch.Tensor, value: float, rng: random.Random) -> torch.Tensor:
    out = tensor.clone()
    flat = out.view(-1)
    flat[rng.randrange(flat.numel())] = value
    return out


def _wrong_shapes(shape: tuple[int, ...], rng: random.Random, count: int) -> list[tuple[int, ...]]:
    shapes = set()
    while len(shapes) < count:
        k = rng.randrange(len(shape) + 1)
        new = list(shape)
        if k == len(shape):
            new.append(rng.randint(1, 3))                          # one more dimension
        elif rng.random() < 0.3:
            new.pop(k)                                             # one fewer
        else:
            new[k] = rng.choice([0, shape[k] + rng.randint(1, 3)])
        if tuple(new) != shape and (len(new) < 3 or new[-3:] != list(shape[-3:])):
            shapes.add(tuple(new))
    return sorted(shapes)


def problem_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    P = _base()
    fields = {"X": P.X, "Y": P.Y, "Z": P.Z, "v": P.v}
    cases = []

    def call(**change):
        args = dict(fields, **change)
        return lambda: A.Problem(**args)

    for name, tensor in fields.items():
        for value in NON_NUMERIC:
            cases.append(("non-numeric", f"{name}={value!r}", call(**{name: value})))
        for value in NON_FINITE:
            for _ in range(4):
                cases.append(("nan/inf", f"{name} with {value}",
                              call(**{name: _with_bad_entry(tensor, value, rng)})))
        for shape in _wrong_shapes(tuple(tensor.shape), rng, 6):
            cases.append(("shape", f"{name} of shape {shape}", call(**{name: torch.ones(shape, dtype=F64)})))
        cases.append(("complex", f"{name} complex", call(**{name: tensor.to(torch.complex128)})))
    for n, T, d in [(0, 3, 4), (2, 3, 0), (2, 1, 4), (2, 0, 4)]:
        X = torch.ones(n, T, d, dtype=F64)
        cases.append(("empty size", f"X {n}x{T}x{d}",
                      lambda X=X, n=n, d=d: A.Problem(X, torch.ones(n, dtype=F64),
                                                      torch.ones(n, d, dtype=F64), torch.ones(d, dtype=F64))))
    for y in (0.0, 2.0, 0.5, -0.5):
        cases.append(("labels", f"Y={y}", call(Y=torch.full((2,), y, dtype=F64))))
    for scale in (1e160, 1e200, 1e300):
        cases.append(("overflow", f"X, v x {scale:g}", call(X=P.X * scale, v=P.v * scale)))
    cases.append(("empty size", "trials of size 0",
                  lambda: A.Problem(torch.ones(0, 2, 3, 4, dtype=F64), torch.ones(0, 2, dtype=F64),
                                    torch.ones(0, 2, 4, dtype=F64), torch.ones(4, dtype=F64))))
    for q in (2.5, "0", 3, -4, None):
        cases.append(("self-attention index", f"query_index={q!r}",
                      lambda q=q: A.Problem.self_attention(P.X, P.Y, P.v, q)))
    return cases


def generator_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    good = dict(n=2, T=3, d=4)
    bad_sizes = [0, -1, 2.5, "3", None, math.nan, True, 1e9 + 0.5]
    cases = []
    for name in good:
        for value in bad_sizes + ([1] if name == "T" else []):
            args = dict(good, **{name: value})
            cases.append(("size", f"{name}={value!r}", lambda args=args: A.random_problem(**args)))
    for value in (0, -2, 2.5, "2", math.inf):
        cases.append(("size", f"trials={value!r}", lambda v=value: A.random_problem(2, 3, 4, trials=v)))
    for value in ("seed", 5, torch.ones(2)):
        cases.append(("type", f"generator={value!r}", lambda v=value: A.random_problem(2, 3, 4, generator=v)))
    for value in ("float", torch.int64, torch.bool, None, 3):
        cases.append(("type", f"dtype={value!r}", lambda v=value: A.random_problem(2, 3, 4, dtype=v)))
    for value in ("nodevice", 3.5, None):
        cases.append(("type", f"device={value!r}", lambda v=value: A.random_problem(2, 3, 4, device=v)))
    for value in ("no", None, 2):
        cases.append(("type", f"unit_norm={value!r}", lambda v=value: A.random_problem(2, 3, 4, unit_norm=v)))
    for name in ("A1", "A2"):
        cases.append(("type", f"figure generator 'x' ({name})",
                      lambda name=name: A.figure_problem(name, generator="x")))
    for value in ("A9", 1, None):
        cases.append(("type", f"figure {value!r}", lambda v=value: A.figure_problem(v)))
    return cases


def attention_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    cases = []
    W = torch.randn(4, 4, dtype=F64)
    for value in NON_NUMERIC + [_base()]:
        cases.append(("non-numeric", f"W={type(value).__name__}", lambda v=value: A.WAttention(v)))
        cases.append(("non-numeric", f"K={type(value).__name__}", lambda v=value: A.KQAttention(v, W)))
        cases.append(("non-numeric", f"p={type(value).__name__}", lambda v=value: A.PromptAttention(v)))
        if value is not None:                                 # None = identity key matrix
            cases.append(("non-numeric", f"key_matrix={type(value).__name__}",
                          lambda v=value: A.PromptAttention(torch.ones(4, dtype=F64), v)))
    for value in NON_FINITE:
        for _ in range(3):
            cases.append(("nan/inf", f"W with {value}", lambda v=value: A.WAttention(_with_bad_entry(W, v, rng))))
            cases.append(("nan/inf", f"Q with {value}", lambda v=value: A.KQAttention(W, _with_bad_entry(W, v, rng))))
            cases.append(("nan/inf", f"p with {value}",
                          lambda v=value: A.PromptAttention(_with_bad_entry(torch.ones(4, dtype=F64), v, rng))))
    for shape in [(), (4,), (3, 4), (0, 0), (2, 0, 0), (0, 4, 4)]:
        cases.append(("shape", f"W {shape}", lambda s=shape: A.WAttention(torch.ones(s, dtype=F64))))
    for ks, qs in [((4, 0), (4, 0)), ((4, 2), (4, 3)), ((4,), (4,)), ((), ()), ((0, 4, 2), (0, 4, 2))]:
        cases.append(("shape", f"K {ks} Q {qs}",
                      lambda ks=ks, qs=qs: A.KQAttention(torch.ones(ks, dtype=F64), torch.ones(qs, dtype=F64))))
    for p, km in [((), None), ((0,), None), ((4,), (4,)), ((4,), (3, 3)), ((4,), (4, 3)), ((4,), ()),
                  ((4,), (2, 4, 4))]:
        cases.append(("shape", f"p {p} key_matrix {km}",
                      lambda p=p, km=km: A.PromptAttention(torch.ones(p, dtype=F64),
                                                           None if km is None else torch.ones(km, dtype=F64))))
    for value in (0, -1, 2.5, "3", None):
        cases.append(("size", f"zeros(d={value!r})", lambda v=value: A.WAttention.zeros(v)))
        cases.append(("size", f"init(d={value!r})", lambda v=value: A.KQAttention.init(v)))
        if value is not None:                                # None = the default (no trials, m = d)
            cases.append(("size", f"zeros(trials={value!r})", lambda v=value: A.WAttention.zeros(4, trials=v)))
            cases.append(("size", f"init(m={value!r})", lambda v=value: A.KQAttention.init(4, m=v)))
            cases.append(("size", f"init(trials={value!r})", lambda v=value: A.KQAttention.init(4, trials=v)))
    for value in (math.nan, math.inf, -0.1, "0.1", None):
        cases.append(("tolerance", f"init(scale={value!r})", lambda v=value: A.KQAttention.init(4, scale=v)))
    return cases


def svm_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    P = _base(1)
    X, Z, alpha = P.X, P.Z, P.opt
    cases = []
    for value in NON_NUMERIC + [_base()]:
        cases.append(("non-numeric", f"X={type(value).__name__}", lambda v=value: A.att_svm(v, Z, alpha)))
        cases.append(("non-numeric", f"Z={type(value).__name__}", lambda v=value: A.att_svm(X, v, alpha)))
        cases.append(("non-numeric", f"alpha={type(value).__name__}", lambda v=value: A.att_svm(X, Z, v)))
        cases.append(("non-numeric", f"keys={type(value).__name__}", lambda v=value: A.p_svm(v, alpha)))
    for value in NON_FINITE:
        for _ in range(3):
            cases.append(("nan/inf", f"X with {value}", lambda v=value: A.att_svm(_with_bad_entry(X, v, rng), Z, alpha)))
            cases.append(("nan/inf", f"Z with {value}", lambda v=value: A.att_svm(X, _with_bad_entry(Z, v, rng), alpha)))
            cases.append(("nan/inf", f"keys with {value}", lambda v=value: A.p_svm(_with_bad_entry(X, v, rng), alpha)))
    for n, T, d in [(0, 3, 4), (2, 1, 4), (2, 3, 0), (2, 0, 4)]:
        Xe = torch.ones(n, T, d, dtype=F64)
        cases.append(("empty size", f"X {n}x{T}x{d}",
                      lambda Xe=Xe, n=n, d=d: A.att_svm(Xe, torch.ones(n, d, dtype=F64), torch.zeros(n, dtype=torch.long))))
        cases.append(("empty size", f"keys {n}x{T}x{d}",
                      lambda Xe=Xe, n=n: A.p_svm(Xe, torch.zeros(n, dtype=torch.long))))
    for bad in ([0, 3], [0], [0.5, 1.0], [-1, 0], [0, 1, 2], [math.nan, 0]):
        cases.append(("selection", f"alpha={bad}", lambda b=bad: A.att_svm(X, Z, torch.tensor(b))))
        cases.append(("selection", f"p alpha={bad}", lambda b=bad: A.p_svm(X, torch.tensor(b))))
    for shape in _wrong_shapes(tuple(Z.shape), rng, 5):
        cases.append(("shape", f"Z {shape}", lambda s=shape: A.att_svm(X, torch.ones(s, dtype=F64), alpha)))
    for value in ("l1", "Fro", None, 2):
        cases.append(("option", f"norm={value!r}", lambda v=value: A.att_svm(X, Z, alpha, norm=v)))
    for value in ("NOPE", 5, None, ""):
        cases.append(("option", f"solver={value!r}", lambda v=value: A.att_svm(X, Z, alpha, solver=v)))
    for name in ("rank_tol", "support_tol"):
        for value in (math.nan, -1e-5, math.inf, "1e-5", None):
            cases.append(("tolerance", f"{name}={value!r}", lambda n=name, v=value: A.att_svm(X, Z, alpha, **{n: v})))
    for value in (math.nan, -1e-5, math.inf, "x"):
        cases.append(("tolerance", f"p support_tol={value!r}", lambda v=value: A.p_svm(X, alpha, support_tol=v)))
    return cases


def training_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    P = _base(2)
    cases = []

    def W():
        return A.WAttention.zeros(4)

    def KQ():
        return A.KQAttention.init(4, generator=A.set_seed(1))

    def path(att, **kw):
        kw.setdefault("steps", 5)
        return lambda: A.regularization_path(att(), P, kw.pop("radii", [1.0, 2.0]), **kw)

    def train(att, **kw):
        return lambda: A.train(att(), P, kw.pop("steps", 5), **kw)

    for run, name in ((train, "train"), (path, "path")):
        for att in (W, KQ):
            for value in (P.X, torch.eye(4), "W", None):
                cases.append(("type", f"{name}: attention={type(value).__name__}",
                              (lambda v=value: A.train(v, P, 5)) if name == "train" else
                              (lambda v=value: A.regularization_path(v, P, [1.0]))))
            for value in (P.X, "P", None, {"X": 1}):
                cases.append(("type", f"{name}: problem={type(value).__name__}",
                              (lambda v=value, att=att: A.train(att(), v, 5)) if name == "train" else
                              (lambda v=value, att=att: A.regularization_path(att(), v, [1.0]))))
            for value in ("hinge", 5, None):
                cases.append(("option", f"{name}: loss={value!r}", run(att, loss=value)))
            for value in ("linear", 5, torch.ones(4)):
                cases.append(("type", f"{name}: head={value!r}", run(att, head=value)))
            for value in (math.nan, -3, 2.5, "10", None, True):
                cases.append(("size", f"{name}: steps={value!r}", run(att, steps=value)))
            for ref in (torch.full((4, 4), math.nan, dtype=F64), torch.ones(3, 3, dtype=F64), "ref",
                        torch.zeros(4, 4, dtype=F64) if name == "path" else torch.ones(5, dtype=F64)):
                cases.append(("reference", f"{name}: reference {ref if isinstance(ref, str) else tuple(ref.shape)}",
                              run(att, reference=ref)))
    for att in (W, KQ):
        for value in (0, -0.1, math.nan, math.inf, "0.1", None):
            cases.append(("step", f"train: lr={value!r}", train(att, lr=value)))
        for value in ("adam", None, 1):
            cases.append(("option", f"train: method={value!r}", train(att, method=value)))
        for value in (0, -1, 2.5, "1"):
            cases.append(("size", f"train: log_every={value!r}", train(att, log_every=value)))
        for knob in ("eps", "ridge"):
            for value in (math.nan, -1e-16, math.inf, "0"):
                cases.append(("tolerance", f"train: {knob}={value!r}", train(att, **{knob: value})))
        for value in (5, "f"):
            cases.append(("type", f"train: callback={value!r}", train(att, callback=value)))
        for value in ("yes", None, 1):
            cases.append(("type", f"train: warn={value!r}", train(att, warn=value)))
        cases.append(("trials", "train: a shared trained head on trials",
                      lambda: A.train(A.WAttention.zeros(4, trials=2), A.studies.repeat_instance(P, 2), 3,
                                      head=A.LinearHead(P.v))))
        for value in (0, -1.0, math.nan, math.inf, "1"):
            cases.append(("step", f"train: max_step={value!r}", train(att, max_step=value)))
        cases.append(("option", "train: polyak with the textbook softmax",
                      train(att, method="polyak", stable=False)))
        for radii in ([math.nan, 1.0], [], [-1.0, 1.0], [2.0, 1.0], "radii", [[1.0, 2.0]], [0.0], [math.inf]):
            cases.append(("radii", f"path: radii={radii!r}", path(att, radii=radii)))
        for name in ("initial_step", "tol"):
            for value in (0, -0.1, math.nan, math.inf, 2.0, "0.1"):
                cases.append(("step", f"path: {name}={value!r}", path(att, **{name: value})))
    D = torch.eye(4, dtype=F64)
    for cone in ((torch.full((4, 4), math.nan, dtype=F64), 0.1), (torch.zeros(4, 4, dtype=F64), 0.1),
                 (D, math.nan), (D, -0.1), (D, 3.0), (D, 0), (D,), "cone", (torch.ones(3, 3, dtype=F64), 0.1),
                 (D, "0.1")):
        cases.append(("cone", f"path: cone={cone!r}"[:60], path(W, cone=cone)))
    cases.append(("cone", "path: cone on (K, Q)", path(KQ, cone=(D, 0.1))))
    for start in (lambda: A.WAttention(torch.eye(3, dtype=F64)),
                  lambda: A.KQAttention(torch.ones(5, 2, dtype=F64), torch.ones(5, 2, dtype=F64))):
        cases.append(("shape", "path: a start of another dimension than the problem's", path(start)))
    for start in (lambda: A.WAttention(0.1 * torch.eye(4, dtype=torch.float32)),
                  lambda: A.KQAttention.init(4, dtype=torch.float32)):
        cases.append(("dtype", "train: a float32 attention on a float64 problem", train(start)))
        cases.append(("dtype", "path: a float32 start on a float64 problem", path(start)))
    for value in ("yes", None, 2):
        cases.append(("type", f"path: sphere={value!r}", path(W, sphere=value)))
    return cases


def method_cases(rng: random.Random) -> list[tuple[str, str, Callable]]:
    """Methods and helpers around the entry points: trials, stacking, casts, heads, risks."""
    P, B = _base(3), A.random_problem(2, 3, 4, trials=3, generator=A.set_seed(4))
    W = A.WAttention.zeros(4)
    cases = []
    for index in (3, -4, 1.5, "0", None):
        cases.append(("index", f"trial({index!r})", lambda i=index: B.trial(i)))
    for problems in ([P, A.random_problem(2, 4, 4)], [P, P.X], "P", [P, B]):
        cases.append(("stack", f"stack of {type(problems).__name__}", lambda p=problems: A.Problem.stack(p)))
    for value in (torch.int64, "float64", 3):
        cases.append(("type", f"to(dtype={value!r})", lambda v=value: P.to(dtype=v)))
    for value in ("nodevice", 5):
        cases.append(("type", f"to(device={value!r})", lambda v=value: P.to(device=v)))
    for Z in (torch.ones(3, 4), torch.full((2, 4), math.nan), "Z"):
        cases.append(("shape", "with_queries", lambda z=Z: P.with_queries(z)))
    for value in (P.X, "P", None):
        for name, fn in (("logits", W.logits), ("probabilities", W.probabilities)):
            cases.append(("type", f"{name}({type(value).__name__})", lambda f=fn, v=value: f(v)))
        cases.append(("type", f"empirical_risk(problem={type(value).__name__})",
                      lambda v=value: A.empirical_risk(W, v)))
        cases.append(("type", f"predict(attention={type(value).__name__})",
                      lambda v=value: A.predict(v, P)))
    for V, a in ((torch.ones(4), None), (torch.ones(4, 3), torch.ones(2)), ("V", None),
                 (torch.full((4, 3), math.nan), None), (torch.ones(4, 0), None)):
        cases.append(("head", "MLPHead", lambda V=V, a=a: A.MLPHead(V, a)))
    for v in (torch.tensor(1.0), torch.ones(0), "v", torch.full((4,), math.inf)):
        cases.append(("head", "LinearHead", lambda v=v: A.LinearHead(v)))
    cases.append(("head", "MLPHead of width 5 on d = 4",
                  lambda: A.empirical_risk(W, P, A.MLPHead(torch.ones(5, 2)))))
    for alpha in ([0], [0, 3], "a", [0.5, 1.0]):
        cases.append(("selection", f"is_locally_optimal alpha={alpha!r}",
                      lambda a=alpha: A.is_locally_optimal(P, a, A.att_svm(P.X, P.Z, P.opt))))
    cases.append(("type", "is_locally_optimal(result=None)", lambda: A.is_locally_optimal(P, P.opt, None)))
    cases.append(("type", "classify_selections(tensor)", lambda: A.maxmargin.classify_selections(P.X)))
    cases.append(("type", "selection_kind(tensor)", lambda: A.selection_kind(P.X, [0, 0])))
    for value in (P.X, "P", None):
        cases.append(("type", f"optimal_risk({type(value).__name__})", lambda v=value: A.model.optimal_risk(v)))
        cases.append(("type", f"excess_risk(problem={type(value).__name__})",
                      lambda v=value: A.excess_risk(W, v)))
        cases.append(("type", f"excess_risk(attention={type(value).__name__})",
                      lambda v=value: A.excess_risk(v, P)))
    for value in ("hinge", None, 3):
        cases.append(("option", f"optimal_risk(loss={value!r})", lambda v=value: A.model.optimal_risk(P, v)))
        cases.append(("option", f"excess_risk(loss={value!r})", lambda v=value: A.excess_risk(W, P, v)))
    cases.append(("head", "excess_risk of a prompt model with a wrong d",
                  lambda: A.excess_risk(A.PromptAttention(torch.ones(3, dtype=F64)), P)))
    probs = torch.full((3, 2, 3), 1 / 3, dtype=F64)
    for value, saturation in ((probs[:2], 0.99), (probs.flatten(1), 0.99), (torch.full_like(probs, math.nan), 0.99),
                              ("probs", 0.99), (probs, 0.5), (probs, 1.0), (probs, math.nan), (probs, "0.9")):
        cases.append(("outcomes", f"run_outcomes({type(value).__name__}, saturation={saturation!r})",
                      lambda v=value, s=saturation: A.maxmargin.run_outcomes(B, v, s)))
    cases.append(("type", "run_outcomes(problem=tensor)", lambda: A.maxmargin.run_outcomes(B.X, probs)))
    cases.append(("shape", "run_outcomes on one instance", lambda: A.maxmargin.run_outcomes(P, probs[0])))
    for count, total in ((-1, 10), (11, 10), (0, 0), (True, 4), (1.5, 4), ("1", 4), (1, math.nan), (None, 3)):
        cases.append(("count", f"proportion_interval({count!r}, {total!r})",
                      lambda c=count, t=total: A.book.proportion_interval(c, t)))
    mask = torch.tensor([[True, True, False], [True, False, False]])
    for bad_mask in (mask.int(), mask[:1], torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 3, dtype=torch.bool),
                     "mask", None):
        cases.append(("sets", f"gen_svm(selected={bad_mask if isinstance(bad_mask, str) or bad_mask is None else tuple(bad_mask.shape)})",
                      lambda m=bad_mask: A.gen_svm(P.X, P.Z, m)))
    for value in (torch.full((2, 3, 4), math.nan, dtype=F64), torch.ones(2, 3, dtype=F64), "X"):
        cases.append(("shape", "gen_svm(X bad)", lambda v=value: A.gen_svm(v, P.Z, mask)))
    for probs in (torch.zeros(2, 3, dtype=F64), torch.ones(3, 3, dtype=F64), torch.full((2, 3), math.nan, dtype=F64),
                  "s"):
        cases.append(("probabilities", "finite_part(probabilities bad)",
                      lambda s=probs: A.maxmargin.finite_part(P.X, P.Z, mask, s)))
    for args in ((torch.ones(4, 4), torch.zeros(4, 4), torch.zeros(4, 4)),
                 (torch.ones(4, 4), torch.zeros(3, 3), torch.ones(4, 4)),
                 (torch.full((4, 4), math.nan), torch.zeros(4, 4), torch.ones(4, 4)), ("W", 0, 0)):
        cases.append(("fit", "svm_eq_fit bad", lambda a=args: A.maxmargin.svm_eq_fit(*a)))
    for args in ((P.X, torch.tensor([1.0, 0.0], dtype=F64), [0, 0]), (P.X, torch.ones(3, dtype=F64), [0, 0]),
                 (P.X, P.Y, [0, 5]), (P.X[0], P.Y, [0, 0]), ("X", P.Y, [0, 0]),
                 (torch.full_like(P.X, math.nan), P.Y, [0, 0])):
        cases.append(("labels", "v_svm bad", lambda a=args: A.maxmargin.v_svm(*a)))
    for args in ((P.X, [0, 0], torch.tensor([1, 0])), (P.X, [0, 0], torch.tensor([True])),
                 (P.X, [0, 0], "S"), (P.X, [0, 9], torch.tensor([True, True])),
                 (P.X[0], [0, 0], torch.tensor([True, True]))):
        cases.append(("sets", "relaxed_p_svm bad", lambda a=args: A.maxmargin.relaxed_p_svm(*a)))
    seq_X = torch.randn(2, 3, 4, dtype=F64)
    for X_, Y_, causal in ((seq_X, torch.ones(2, 2, dtype=F64), False), (seq_X[0, 0], torch.ones(3, dtype=F64), False),
                           (seq_X, torch.ones(2, 3, dtype=F64), "yes"), ("X", torch.ones(2, 3), False),
                           (seq_X, torch.zeros(2, 3, dtype=F64), True)):
        cases.append(("sequence", "Problem.sequence bad", lambda a=X_, b=Y_, c=causal: A.Problem.sequence(a, b, P.v, c)))
    for mask in (torch.ones(2, 3), torch.ones(3, 3, dtype=torch.bool), torch.zeros(2, 3, dtype=torch.bool), "m",
                 torch.ones(4, 2, 3, dtype=torch.bool)):
        cases.append(("mask", "Problem(mask=bad)", lambda m=mask: A.Problem(P.X, P.Y, P.Z, P.v, m)))
        cases.append(("mask", "att_svm(mask=bad)", lambda m=mask: A.att_svm(P.X, P.Z, P.opt, mask=m)))
    cases.append(("mask", "att_svm selects a masked token",
                  lambda: A.att_svm(P.X, P.Z, [0, 0], mask=torch.tensor([[False, True, True], [True, True, True]]))))
    for norm in (0.5, "nuc", math.nan, -math.inf, True, None, -2):
        cases.append(("norm", f"norm_svm(norm={norm!r})", lambda q=norm: A.norm_svm(P.X, P.Z, P.opt, q)))
    # p = inf is solved (the norm of sign descent): its answer meets the margins and is no longer in
    # its own norm than the Frobenius solution rescaled to margin 1
    cases.append(("norm", "norm_svm(norm=inf)", checked(
        lambda: (A.norm_svm(P.X, P.Z, P.opt, math.inf), A.att_svm(P.X, P.Z, P.opt)),
        lambda r: abs(r[0].min_margin - 1) < 1e-6 and float(A.maxmargin.matrix_norm(r[0].W, math.inf))
        <= float(A.maxmargin.matrix_norm(r[1].W, math.inf)) * (1 + 1e-6))))
    cases.append(("norm", "norm_svm spectral diagonal", lambda: A.norm_svm(P.X, P.Z, P.opt, "spectral", diagonal=True)))
    cases.append(("type", "norm_svm diagonal='yes'", lambda: A.norm_svm(P.X, P.Z, P.opt, 2, diagonal="yes")))
    cases.append(("norm", "matrix_norm(norm=0)", lambda: A.maxmargin.matrix_norm(torch.ones(2, 2), 0)))
    for value in (1.0, 0.5, math.nan, math.inf, "3", None):
        cases.append(("step", f"train mirror p={value!r}", lambda v=value: A.train(W, P, 2, method="mirror", p=v)))
    cases.append(("step", "train mirror with max_step", lambda: A.train(W, P, 2, method="mirror", max_step=1.0)))
    for k, q in ((torch.ones(3, dtype=F64), torch.ones(4, dtype=F64)), (torch.tensor(1.0), torch.tensor(1.0)),
                 ("k", "q"), (torch.full((4,), math.nan, dtype=F64), torch.ones(4, dtype=F64))):
        cases.append(("shape", "DiagonalAttention bad", lambda a=k, b=q: A.model.DiagonalAttention(a, b)))
    for index in (3, "0", None, slice(5, 9), torch.tensor([7]), [[0, 1]]):
        cases.append(("index", f"select({index!r})", lambda i=index: B.select(i)))
    cases.append(("index", "select on one instance", lambda: P.select(slice(1))))
    for alpha in (B.opt[:2], "a", B.opt[:, :1]):
        cases.append(("selection", "svm_stack(alpha bad)", lambda a=alpha: A.maxmargin.svm_stack(B, a)))
    cases.append(("type", "svm_stack(tensor)", lambda: A.maxmargin.svm_stack(B.X, B.opt)))
    cases.append(("shape", "svm_stack on one instance", lambda: A.maxmargin.svm_stack(P, P.opt)))
    cases.append(("reference", "train: zero reference",
                  lambda: A.train(A.WAttention.zeros(4), P, 3, reference=torch.zeros(4, 4))))
    return cases


# --- the newer entry points, one builder per public name (issue 18) ------------------------------

BAD_ARRAYS = ["abc", None, {"a": 1}, object(), [1, "x"]]
SCALES = (1e200, 1e300, 1e-300)
# Devices this machine lacks: on a machine with GPUs the first is the GPU index one past the last.
ABSENT_CUDA = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
DEVICES = (ABSENT_CUDA, "cuda:99", "nodevice", "mps", 3)


def _close(a, b, rtol: float = 1e-9) -> bool:
    a, b = torch.as_tensor(a, dtype=F64), torch.as_tensor(b, dtype=F64)
    top = float(b.abs().max()) if b.numel() else 0.0
    return bool(torch.isfinite(a).all()) and bool(((a - b).abs() <= rtol * top).all())


def newer_cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    """Cases for every public name not covered above: (entry, kind, what, thunk)."""
    P = _base(5)
    B = A.random_problem(2, 3, 4, trials=2, generator=A.set_seed(6))
    S = torch.zeros(2, 3, dtype=torch.bool)
    S[torch.arange(2), P.opt] = True
    cases: list[tuple[str, str, str, Callable]] = []

    def add(entry, kind, what, thunk):
        cases.append((entry, kind, what, thunk))

    # gen_svm / finite_part / selected_sets / svm_eq_fit
    ref = A.gen_svm(P.X, P.Z, S)
    for s in SCALES:
        add("gen_svm", "extreme", f"X x {s:g}", checked(lambda s=s: A.gen_svm(P.X * s, P.Z, S),
                                                       lambda r, s=s: _close(r.W * s, ref.W)))
        add("gen_svm", "extreme", f"Z x {s:g}", checked(lambda s=s: A.gen_svm(P.X, P.Z * s, S),
                                                       lambda r, s=s: _close(r.W * s, ref.W)))
    for value in BAD_ARRAYS:
        add("gen_svm", "non-numeric", f"X={value!r}", lambda v=value: A.gen_svm(v, P.Z, S))
        if value is not None:                                     # mask=None: every token visible
            add("gen_svm", "non-numeric", f"mask={value!r}", lambda v=value: A.gen_svm(P.X, P.Z, S, mask=v))
    for value in (math.nan, -1.0, 2.0, "x", None):
        add("gen_svm", "tolerance", f"support_tol={value!r}", lambda v=value: A.gen_svm(P.X, P.Z, S, support_tol=v))
    probs = torch.softmax(torch.randn(2, 3, dtype=F64), -1)
    for s in SCALES:
        fin = A.maxmargin.finite_part(P.X, P.Z, S, probs)
        add("finite_part", "extreme", f"X x {s:g}",
            checked(lambda s=s: A.maxmargin.finite_part(P.X * s, P.Z, S, probs), lambda r, f=fin, s=s: _close(r * s, f)))
    for value in BAD_ARRAYS:
        add("finite_part", "non-numeric", f"selected={value!r}", lambda v=value: A.maxmargin.finite_part(P.X, P.Z, v, probs))
        add("finite_part", "non-numeric", f"probabilities={value!r}", lambda v=value: A.maxmargin.finite_part(P.X, P.Z, S, v))
    for value in (math.nan, 0.0, -1.0, "1e-8"):
        add("finite_part", "tolerance", f"tol={value!r}", lambda v=value: A.maxmargin.finite_part(P.X, P.Z, S, probs, tol=v))
    for value in BAD_ARRAYS + [torch.full((2, 3), math.nan), torch.ones(3), torch.full((2, 3), 1.5),
                               torch.full((2, 3), -0.1), torch.ones(2, 3, dtype=torch.int64)]:
        add("selected_sets", "probabilities", f"probabilities={str(value)[:30]}", lambda v=value: A.maxmargin.selected_sets(v))
    for keep, masked in ((1e-6, 1e-3), (0.0, 1e-6), (math.nan, 1e-6), ("x", 1e-6), (2.0, 1e-6)):
        add("selected_sets", "threshold", f"keep={keep!r} masked={masked!r}",
            lambda k=keep, m=masked: A.maxmargin.selected_sets(probs, keep=k, masked=m))
    for value in ("m", torch.ones(2, 3), torch.ones(4, 4, dtype=torch.bool), None if False else 5):
        add("selected_sets", "mask", f"mask={str(value)[:30]}", lambda v=value: A.maxmargin.selected_sets(probs, mask=v))
    W_dir, W_fin = ref.W, torch.zeros(4, 4, dtype=F64)
    for s in (1e150, 1e300, 1e-300):
        add("svm_eq_fit", "extreme", f"all x {s:g}",
            checked(lambda s=s: A.maxmargin.svm_eq_fit((W_fin + 3 * W_dir) * s, W_fin * s, W_dir * s),
                    lambda r: abs(r[0] - 3.0) <= 1e-12 and bool(torch.isfinite(r[1]).all())))
    add("svm_eq_fit", "extreme", "C overflows", lambda: A.maxmargin.svm_eq_fit(W_dir * 1e300, W_fin, W_dir * 1e-300))
    for value in BAD_ARRAYS + [torch.ones(4), torch.ones(2, 3, 3)]:
        add("svm_eq_fit", "non-numeric", f"W={str(value)[:30]}", lambda v=value: A.maxmargin.svm_eq_fit(v, W_fin, W_dir))
        add("svm_eq_fit", "non-numeric", f"W_dir={str(value)[:30]}", lambda v=value: A.maxmargin.svm_eq_fit(W_dir, W_fin, v))
    add("svm_eq_fit", "shape", "batch mismatch", lambda: A.maxmargin.svm_eq_fit(torch.ones(3, 4, 4), torch.ones(2, 4, 4), W_dir))
    for empty in ((0, 0), (2, 0, 0)):
        add("svm_eq_fit", "empty", f"W_fin, W_dir, W of shape {empty}",
            lambda e=empty: A.maxmargin.svm_eq_fit(torch.ones(e), torch.zeros(e[-2:]), torch.zeros(e[-2:])))
    for empty in ((2, 0), (0, 3), (0, 2, 3)):
        add("selected_sets", "empty", f"probabilities of shape {empty}",
            lambda e=empty: A.maxmargin.selected_sets(torch.zeros(e, dtype=F64)))

    # v_svm / relaxed_p_svm
    for value in BAD_ARRAYS:
        add("v_svm", "non-numeric", f"alpha={value!r}", lambda v=value: A.maxmargin.v_svm(P.X, P.Y, v))
        add("v_svm", "non-numeric", f"Y={value!r}", lambda v=value: A.maxmargin.v_svm(P.X, v, P.opt))
        add("relaxed_p_svm", "non-numeric", f"supported={value!r}",
            lambda v=value: A.maxmargin.relaxed_p_svm(P.X, P.opt, v))
        add("relaxed_p_svm", "non-numeric", f"alpha={value!r}",
            lambda v=value: A.maxmargin.relaxed_p_svm(P.X, v, torch.ones(2, dtype=torch.bool)))
    for value in (math.nan, -1e-5, "x", None):
        add("v_svm", "tolerance", f"support_tol={value!r}", lambda v=value: A.maxmargin.v_svm(P.X, P.Y, P.opt, support_tol=v))
        add("relaxed_p_svm", "tolerance", f"support_tol={value!r}",
            lambda v=value: A.maxmargin.relaxed_p_svm(P.X, P.opt, torch.ones(2, dtype=torch.bool), support_tol=v))
    vref = A.maxmargin.v_svm(P.X, P.Y, P.opt)
    pref = A.maxmargin.relaxed_p_svm(P.X, P.opt, torch.ones(2, dtype=torch.bool))
    for s in SCALES:
        add("v_svm", "extreme", f"X x {s:g}", checked(lambda s=s: A.maxmargin.v_svm(P.X * s, P.Y, P.opt),
                                                     lambda r, s=s: _close(r.W * s, vref.W)))
        add("relaxed_p_svm", "extreme", f"keys x {s:g}",
            checked(lambda s=s: A.maxmargin.relaxed_p_svm(P.X * s, P.opt, torch.ones(2, dtype=torch.bool)),
                    lambda r, s=s: _close(r.W * s, pref.W)))

    # norm_svm / matrix_norm
    for p in (1e6, 1 + 1e-6, 1.001, 1000.0, "3", None, math.nan):
        add("norm_svm", "norm", f"p={p!r}", lambda q=p: A.norm_svm(P.X, P.Z, P.opt, q))
    for value in (-1.0, math.nan, math.inf, "1e-5", None, 2.0):
        add("norm_svm", "tolerance", f"support_tol={value!r}",
            lambda v=value: A.norm_svm(P.X, P.Z, P.opt, 3, support_tol=v))
    for value in BAD_ARRAYS:
        if value is not None:
            add("norm_svm", "non-numeric", f"mask={value!r}", lambda v=value: A.norm_svm(P.X, P.Z, P.opt, 3, mask=v))
        add("norm_svm", "non-numeric", f"alpha={value!r}", lambda v=value: A.norm_svm(P.X, P.Z, v, 3))
    for p, diagonal in ((3, False), (3, True), (1.5, True), (1, False), ("spectral", False)):
        base = A.norm_svm(P.X, P.Z, P.opt, p, diagonal=diagonal)
        for s in SCALES:
            add("norm_svm", "extreme", f"p={p} diagonal={diagonal} X x {s:g}",
                checked(lambda s=s, p=p, dg=diagonal: A.norm_svm(P.X * s, P.Z, P.opt, p, diagonal=dg),
                        lambda r, s=s, b=base: abs(r.objective * s / b.objective - 1) <= 1e-7
                        and r.min_margin >= 1 - 1e-6))
    for value in BAD_ARRAYS + [torch.ones(3), torch.full((2, 2), math.nan)]:
        add("matrix_norm", "non-numeric", f"W={str(value)[:30]}", lambda v=value: A.maxmargin.matrix_norm(v, 2))
    for p in ("nuc", 0.5, None, -math.inf, True):
        add("matrix_norm", "norm", f"norm={p!r}", lambda q=p: A.maxmargin.matrix_norm(torch.ones(2, 2), q))
    for s in SCALES:
        for p in (1, 2, 3.5, math.inf, "spectral"):     # ||ones(2, 2)||: 4^(1/p); inf: 1; spectral: 2
            add("matrix_norm", "extreme", f"ones x {s:g}, {p}",
                checked(lambda s=s, p=p: A.maxmargin.matrix_norm(torch.ones(2, 2, dtype=F64) * s, p),
                        lambda r, s=s, p=p: _close(r / s, 2.0 if p == "spectral" else 4 ** (1 / p), 1e-12)))

    # kkt_multipliers / constraint_features
    svm = A.att_svm(P.X, P.Z, P.opt)
    lam_ref, _ = A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, svm)
    for s in SCALES + (1e100, 1e-100):
        add("kkt_multipliers", "extreme", f"X x {s:g}",
            checked(lambda s=s: A.maxmargin.kkt_multipliers(P.X * s, P.Z, P.opt, A.att_svm(P.X * s, P.Z, P.opt)),
                    lambda r, s=s: _close(r[0] * s * s, lam_ref, 1e-8) and r[1] < 1e-10))
        add("constraint_features", "extreme", f"X x {s:g}",
            checked(lambda s=s: A.maxmargin.constraint_features(P.X * s, P.Z * s, P.opt),
                    lambda r, s=s: _close(r, A.maxmargin.constraint_features(P.X, P.Z, P.opt) * s * s, 1e-12)))
    for value in BAD_ARRAYS + [A.att_svm(P.X, P.Z, P.opt, "nuc"), A.maxmargin.v_svm(P.X, P.Y, P.opt)]:
        add("kkt_multipliers", "type", f"result={type(value).__name__}",
            lambda v=value: A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, v))
    for value in BAD_ARRAYS:
        add("constraint_features", "non-numeric", f"X={value!r}", lambda v=value: A.maxmargin.constraint_features(v, P.Z, P.opt))
        add("constraint_features", "non-numeric", f"alpha={value!r}", lambda v=value: A.maxmargin.constraint_features(P.X, P.Z, v))

    # train's methods, DiagonalAttention, heads
    W = A.WAttention.zeros(4)
    for method in ("gd", "ngd", "polyak", "mirror", "spectral"):
        add("train", "batched", f"shared W on a batched problem, {method}",       # refused: a sum
            lambda m=method: A.train(A.WAttention.zeros(4), B, 3, method=m))
        add("train", "batched", f"batched W on an unbatched problem, {method}",
            checked(lambda m=method: A.train(A.WAttention.zeros(4, trials=3), P, 3, method=m,
                                             max_step=1.0 if m == "polyak" else None),
                    lambda h: h.loss.shape == (4, 3) and bool(torch.isfinite(h.loss).all())))
        for s in (1e200, 1e300):
            for make in ("W", "KQ"):
                def start(s=s, make=make):
                    g = A.set_seed(7)
                    if make == "W":
                        return A.WAttention(torch.randn(4, 4, generator=g, dtype=F64) * s)
                    return A.KQAttention(torch.randn(4, 4, generator=g, dtype=F64) * s,
                                         torch.randn(4, 4, generator=g, dtype=F64) * s)

                def run(m=method, start=start):
                    att = start()
                    h = A.train(att, P, 4, method=m, max_step=1.0 if m == "polyak" else None, p=3.0)
                    return h, att

                add("train", "extreme", f"{make} x {s:g}, {method}",
                    checked(run, lambda r: all(bool(torch.isfinite(t).all()) for t in
                                               (r[0].loss, r[0].norm, r[0].max_prob, *r[1].params))))
        for value in ("no", None, 1):
            add("train", "type", f"{method}: stable={value!r}", lambda m=method, v=value: A.train(W, P, 2, method=m, stable=v))
    for p in (1.0, 1 + 1e-300, -2.0, math.nan, "2"):
        add("train", "step", f"mirror p={p!r}", lambda q=p: A.train(A.WAttention.zeros(4), P, 2, method="mirror", p=q))
    for d in ((torch.ones(4, dtype=F64), torch.ones(3, dtype=F64)),
              (torch.ones(0, dtype=F64), torch.ones(0, dtype=F64))) + tuple((v, torch.ones(4)) for v in BAD_ARRAYS):
        add("DiagonalAttention", "shape", f"k, q = {str(d)[:40]}", lambda d=d: A.model.DiagonalAttention(*d))
    for kw in ({"d": 0}, {"d": 4, "trials": 0}, {"d": 4, "scale": -1.0}, {"d": 4, "dtype": None},
               {"d": 4, "device": ABSENT_CUDA}, {"d": "4"}):
        add("DiagonalAttention", "init", f"init({kw})", lambda kw=kw: A.model.DiagonalAttention.init(**kw))
    for v, lam in ((torch.ones(3, 4), 0.1), (torch.ones(4), -1.0), (torch.ones(4), math.nan), ("v", 0.1),
                   (torch.ones(4), "0.1"), (torch.tensor(1.0), 0.1), (torch.ones(0), 0.1)):
        add("PenalizedHead", "head", f"PenalizedHead({str(v)[:20]}, {lam!r})",
            lambda v=v, lam=lam: A.empirical_risk(W, B, A.model.PenalizedHead(v, lam)))
    for head in (A.MLPHead(torch.ones(3, 4, 2, dtype=F64)), A.LinearHead(torch.ones(3, 4, dtype=F64)),
                 A.LinearHead(torch.ones(4, dtype=torch.float32))):
        add("MLPHead", "head", f"head of trials {type(head).__name__} vs problem of 2",
            lambda h=head: A.empirical_risk(W, B, h))
    for value in ("no", None, 1.0):
        add("predict", "type", f"stable={value!r}", lambda v=value: A.predict(W, P, stable=v))
        add("empirical_risk", "type", f"stable={value!r}", lambda v=value: A.empirical_risk(W, P, stable=v))
        add("attention_output", "type", f"stable={value!r}",
            lambda v=value: A.attention_output(P.X, torch.zeros(2, 3, dtype=F64), stable=v))
    for value in BAD_ARRAYS:
        add("attention_output", "type", f"logits={value!r}", lambda v=value: A.attention_output(P.X, v))

    # A6: a6_draw / ngd_relu_head / span_iterates
    X6, Y6, Z6, V6, W6 = A.studies.a6_draw(2, 3, generator=A.set_seed(8))
    for kw in ({"dtype": None}, {"dtype": torch.int64}, {"dtype": "float64"}, {"count": 0}, {"d": -1},
               {"T": 1}, {"n": 2.5}, {"generator": "seed"}):
        args = dict({"count": 2, "d": 3}, **kw)
        add("a6_draw", "argument", f"a6_draw({kw})", lambda a=args: A.studies.a6_draw(**a))
    for s in (1e160, 1e300):
        add("ngd_relu_head", "extreme", f"X x {s:g}", lambda s=s: A.studies.ngd_relu_head(X6 * s, Y6, Z6, V6, W6, steps=3, every=1))
        add("ngd_relu_head", "extreme", f"W0 x {s:g}",
            checked(lambda s=s: A.studies.ngd_relu_head(X6, Y6, Z6, V6, W6 * s, steps=3, every=1),
                    lambda r: bool(torch.isfinite(r).all())))
    base6 = A.studies.ngd_relu_head(X6, Y6, Z6, V6, W6, steps=3, every=1)
    add("ngd_relu_head", "dtype", "X float32, the rest float64",
        checked(lambda: A.studies.ngd_relu_head(X6.float(), Y6, Z6, V6, W6, steps=3, every=1),
                lambda r: r.dtype == F64 and _close(r, A.studies.ngd_relu_head(X6.float().double(), Y6, Z6, V6, W6,
                                                                       steps=3, every=1), 1e-12)))
    for name in ("X", "Y", "Z", "V", "W0"):
        for value in BAD_ARRAYS + [torch.ones(1)]:
            args = dict(X=X6, Y=Y6, Z=Z6, V=V6, W0=W6)
            args[name] = value
            add("ngd_relu_head", "non-numeric", f"{name}={str(value)[:20]}", lambda a=args: A.studies.ngd_relu_head(**a, steps=2))
    for kw in ({"steps": -1}, {"lr": 0.0}, {"eps": math.nan}, {"every": 0}, {"chunk": "1"}):
        add("ngd_relu_head", "argument", f"{kw}", lambda kw=kw: A.studies.ngd_relu_head(X6, Y6, Z6, V6, W6, **kw))
    for name in ("beta", "X", "Z", "W0"):
        for value in BAD_ARRAYS + [torch.ones(2), torch.full((4, 2, 12), math.nan)]:
            args = dict(beta=base6, X=X6, Z=Z6, W0=W6)
            args[name] = value
            add("span_iterates", "non-numeric", f"{name}={str(value)[:20]}", lambda a=args: A.studies.span_iterates(**a))
    add("span_iterates", "extreme", "beta x 1e300", lambda: A.studies.span_iterates(base6 * 0 + 1e308, X6, Z6, W6))

    # run_outcomes, SVMCache, selections
    probs_B = torch.full((2, 2, 3), 1 / 3, dtype=F64)
    for value, kw in ((probs_B * 3, {}), (probs_B, {"norm": "l2"}), (probs_B, {"norm": None}),
                      (-probs_B, {}), (probs_B, {"saturation": "0.9"}), (probs_B, {"saturation": True}),
                      (probs_B.long(), {})):
        add("run_outcomes", "outcomes", f"run_outcomes({kw}) x", lambda v=value, kw=kw: A.maxmargin.run_outcomes(B, v, **kw))
    for value in BAD_ARRAYS:
        add("run_outcomes", "non-numeric", f"probabilities={value!r}", lambda v=value: A.maxmargin.run_outcomes(B, v))
    cache = A.maxmargin.SVMCache()
    for alpha in BAD_ARRAYS + [[0.5, 1.0], [0, 7], [True, False], [0, 0, 0]]:
        add("SVMCache", "selection", f"solve(alpha={alpha!r})", lambda a=alpha: cache.solve(P, a))
    for value in ("l2", None, 2):
        add("SVMCache", "norm", f"solve(norm={value!r})", lambda v=value: cache.solve(P, P.opt, v))
        add("SVMCache", "norm", f"stack(norm={value!r})", lambda v=value: cache.stack(B, B.opt, v))
        add("selection_kind", "norm", f"norm={value!r}", lambda v=value: A.selection_kind(P, P.opt, v))
        add("classify_selections", "norm", f"norm={value!r}", lambda v=value: A.maxmargin.classify_selections(P, v))
    for value in (P.X, "P", None):
        add("SVMCache", "type", f"solve(problem={type(value).__name__})", lambda v=value: cache.solve(v, P.opt))
    for alpha in BAD_ARRAYS + [[0.5, 1.0], [0, 7]]:
        add("selection_kind", "selection", f"alpha={alpha!r}", lambda a=alpha: A.selection_kind(P, a))

    # report: claim / within / format_table / proportion_interval
    for ok in ("no", 1, None, 0.0, torch.tensor([True, False])):
        add("claim", "type", f"ok={ok!r}", lambda o=ok: A.book.claim("k", 1.0, o))
    for kind in ("differs", "Reproduced", None, 3, ""):
        add("claim", "argument", f"kind={kind!r}", lambda k=kind: A.book.claim("k", 1.0, True, kind=k))
    for note in (3, b"x", ["a"]):
        add("claim", "type", f"note={note!r}", lambda n=note: A.book.claim("k", 1.0, True, note=n))
    for key, value, fmt in ((3, 1.0, ".4f"), ("k", None, ".4f"), ("k", [1.0], ".4f"), ("k", 1.0, 4),
                            ("k", 1.0, "q"), ("a b", 1.0, ".4f"), ("", 1.0, ".4f")):
        add("claim", "argument", f"claim({key!r}, {value!r}, fmt={fmt!r})", lambda a=(key, value, True, fmt): A.book.claim(*a))
    for args in (("1", 1.0, 0.1), (1.0, "1", 0.1), (1.0, 1.0, "0.1"), (1.0, 1.0, -1.0), (1.0, math.nan, 0.1),
                 (None, 1.0, 0.1), (1.0, 1.0, math.nan)):
        add("within", "argument", f"within{args!r}", lambda a=args: A.book.within(*a))
    for header, rows in (("ab", [[1, 2]]), (["a", "b"], "rows"), (["a", "b"], [[1]]), (None, []), (["a"], ["x"]),
                         ([], [])):
        add("format_table", "argument", f"format_table({header!r}, {rows!r})", lambda h=header, r=rows: A.book.format_table(h, r))
    add("proportion_interval", "extreme", "(3e299, 1e300)",
        checked(lambda: A.book.proportion_interval(3e299, 1e300), lambda r: abs(r[0] - 0.3) < 1e-12 and abs(r[1] - 0.3) < 1e-12))
    for args in ((1, math.inf), (math.inf, math.inf), (1, 10, -1.0), (1, 10, "1.96"), (1, 10, math.nan)):
        add("proportion_interval", "count", f"{args!r}", lambda a=args: A.book.proportion_interval(*a))

    # seeds, devices
    for seed in (2 ** 32, 2 ** 32 + 5, 2 ** 64, 2 ** 100, -1, 1.5, "0", None, True):
        add("set_seed", "seed", f"seed={seed!r}", lambda s=seed: A.set_seed(s))
    add("set_seed", "extreme", "seed=2**32-1", checked(lambda: A.set_seed(2 ** 32 - 1),
                                                       lambda g: g.initial_seed() == 2 ** 32 - 1))
    for device in DEVICES:
        add("get_device", "device", f"get_device({device!r})", lambda d=device: A.get_device(d))
        add("random_problem", "device", f"device={device!r}", lambda d=device: A.random_problem(2, 3, 4, device=d))
        add("Problem", "device", f"to({device!r})", lambda d=device: P.to(d))
        add("WAttention", "device", f"zeros(device={device!r})", lambda d=device: A.WAttention.zeros(4, device=d))
        add("KQAttention", "device", f"init(device={device!r})", lambda d=device: A.KQAttention.init(4, device=d))
        add("DiagonalAttention", "device", f"init(device={device!r})", lambda d=device: A.model.DiagonalAttention.init(4, device=d))
        if device in (ABSENT_CUDA, "cuda:99", "mps"):
            add("get_device", "device", f"torch.device({device!r})", lambda d=device: A.get_device(torch.device(d)))

    # metrics and helpers
    probs_P = torch.full((2, 3), 1 / 3, dtype=F64)
    for value in BAD_ARRAYS + [torch.full((2, 3), math.nan), torch.full((2, 3), 2.0)]:
        for name, fn in (("probability_on", lambda v: A.model.probability_on(v, P.opt)),
                         ("probability_off", lambda v: A.model.probability_off(v, P.opt)),
                         ("max_probability", lambda v: A.max_probability(v)),
                         ("selected_tokens", lambda v: A.selected_tokens(v))):
            add(name, "probabilities", f"{name}({str(value)[:20]})", lambda f=fn, v=value: f(v))
    for alpha in BAD_ARRAYS + [torch.tensor([0, 5]), torch.tensor([0.5, 1.0]), torch.tensor([0, 0, 0])]:
        add("probability_on", "selection", f"alpha={str(alpha)[:20]}", lambda a=alpha: A.model.probability_on(probs_P, a))
        add("probability_off", "selection", f"alpha={str(alpha)[:20]}", lambda a=alpha: A.model.probability_off(probs_P, a))
        add("is_global", "selection", f"alpha={str(alpha)[:20]}", lambda a=alpha: A.model.is_global(P, a))
    add("is_global", "type", "problem=tensor", lambda: A.model.is_global(P.X, P.opt))
    for a, b, k in (("x", torch.ones(2), 0), (torch.ones(2), None, 0), (torch.ones(2), torch.ones(3), 0),
                    (torch.ones(2, 2), torch.ones(2, 2), 2), (torch.ones(2), torch.ones(2), -1),
                    (torch.ones(2), torch.ones(2), "0"), (torch.full((2,), math.nan), torch.ones(2), 0)):
        add("corr", "argument", f"corr({str(a)[:12]}, {str(b)[:12]}, {k!r})", lambda a=a, b=b, k=k: A.corr(a, b, k))
    for s in SCALES:
        add("corr", "extreme", f"x {s:g}", checked(lambda s=s: A.corr(torch.ones(3, dtype=F64) * s, torch.ones(3, dtype=F64)),
                                                   lambda r: abs(float(r) - 1) < 1e-15))
        add("numerical_rank", "extreme", f"x {s:g}",
            checked(lambda s=s: A.numerical_rank(torch.diag(torch.tensor([1.0, 1e-3, 0.0], dtype=F64)) * s),
                    lambda r: int(r) == 2))
    for value, tol in (("W", 1e-6), (torch.ones(3), 1e-6), (torch.eye(2), -1.0), (torch.eye(2), "x"),
                       (torch.full((2, 2), math.nan), 1e-6), (torch.ones(0, 2), 1e-6)):
        add("numerical_rank", "argument", f"({str(value)[:15]}, {tol!r})", lambda v=value, t=tol: A.numerical_rank(v, t))
    for grad, k, eps in (("g", 2, 0.0), (torch.ones(2, 2), 3, 0.0), (torch.ones(2, 2), 0, 0.0),
                         (torch.ones(2, 2), 2, -1.0), (torch.full((2, 2), math.nan), 2, 0.0), (torch.ones(2, 2), "2", 0.0)):
        add("block_normalize", "argument", f"({str(grad)[:12]}, {k!r}, {eps!r})",
            lambda g=grad, k=k, e=eps: A.model.block_normalize(g, k, e))
    add("block_normalize", "extreme", "grad x 1e-300",
        checked(lambda: A.model.block_normalize(torch.ones(2, 2, dtype=F64) * 1e-300, 2),
                lambda r: _close(r, torch.full((2, 2), 0.5, dtype=F64), 1e-15)))
    # probe_solution_set
    D = torch.eye(4, dtype=F64)
    probe = A.maxmargin.probe_solution_set(P.X, P.Z, P.opt, "spectral", D)
    for s in (2.0 ** 300, 1e-200):
        add("probe_solution_set", "extreme", f"X x {s:g}",
            checked(lambda s=s: A.maxmargin.probe_solution_set(P.X * s, P.Z, P.opt, "spectral", D),
                    lambda r, s=s: abs(r.optimum * s / probe.optimum - 1) <= 1e-6))
    for value in BAD_ARRAYS + [torch.zeros(4, 4), torch.ones(3, 3), torch.full((4, 4), math.nan)]:
        add("probe_solution_set", "non-numeric", f"direction={str(value)[:30]}",
            lambda v=value: A.maxmargin.probe_solution_set(P.X, P.Z, P.opt, "spectral", v))
    for norm in ("fro", 0.5, None, math.nan):
        add("probe_solution_set", "norm", f"norm={norm!r}",
            lambda q=norm: A.maxmargin.probe_solution_set(P.X, P.Z, P.opt, q, D))
    # nuclear_dual / first_order_nuclear_svm
    dual = A.maxmargin.nuclear_dual(P.X, P.Z, P.opt)
    for s in SCALES[:2]:
        add("nuclear_dual", "extreme", f"X x {s:g}",
            checked(lambda s=s: A.maxmargin.nuclear_dual(P.X * s, P.Z, P.opt),
                    lambda r, s=s: abs(r.value * s / dual.value - 1) <= 1e-6))
    for value in BAD_ARRAYS:
        add("nuclear_dual", "non-numeric", f"X={str(value)[:30]}", lambda v=value: A.maxmargin.nuclear_dual(v, P.Z, P.opt))
        add("first_order_nuclear_svm", "non-numeric", f"X={str(value)[:30]}",
            lambda v=value: A.first_order_nuclear_svm(v, P.Z, P.opt))
    add("first_order_nuclear_svm", "extreme", "X x 1e200",
        checked(lambda: A.first_order_nuclear_svm(P.X * 1e200, P.Z, P.opt),
                lambda r: r.W is not None and bool(torch.isfinite(r.W).all())))
    history = A.train(A.WAttention.zeros(4), P, 4)
    for tol in (0.0, -1.0, math.nan, "x"):
        add("History", "tolerance", f"unsettled({tol!r})", lambda t=tol: history.unsettled(t))
    cases.extend(study_cases(P))     # in their own scope: no loop variable rebinds a name above
    cases.extend(submodule_cases())
    return cases


def study_cases(P: A.Problem) -> list[tuple[str, str, str, Callable]]:
    """The A4 study (attnsvm.studies.a4) and the basin map (attnsvm.studies.basin); ``P`` is one instance (n = 2)."""
    cases: list[tuple[str, str, str, Callable]] = []

    def add(entry, kind, what, thunk):
        cases.append((entry, kind, what, thunk))

    # the A4 study (attnsvm.studies.a4)
    B4 = A.random_problem(2, 3, 2, trials=3, generator=A.set_seed(12))
    probs4 = torch.full((3, 2, 3), 1 / 3, dtype=F64)
    for args, kw in (((0, 3, 4, 0, 5), {}), ((2, 1, 4, 0, 5), {}), ((2, 3, 4, -1, 5), {}), ((2, 3, 4, "0", 5), {}),
                     ((2, 3, 4, 0, 0), {}), ((2, 3, 4, 0, 3), {"start": 3}), ((2, 3, 4, 0, 5), {"drawn": 2}),
                     ((2, 3, 4, 0, 5), {"unit_norm": "yes"}), ((2, 3, 4, 2 ** 40, 5), {})):
        add("seeded_instances", "argument", f"{args} {kw}", lambda a=args, kw=kw: A.studies.seeded_instances(*a, **kw))
    for problem in (P, "P", None, B4.X):
        add("ngd_outcomes", "type", f"problem={type(problem).__name__}", lambda q=problem: A.studies.ngd_outcomes(q, steps=2))
    for W0 in (torch.zeros(2, 2, 2, dtype=F64), torch.full((3, 2, 2), math.nan, dtype=F64), "abc", [[1.0]]):
        add("ngd_outcomes", "W0", f"W0={str(W0)[:20]}", lambda w=W0: A.studies.ngd_outcomes(B4, w, steps=2))
    for kw in ({"steps": 0}, {"steps": 2.5}, {"lr": -1.0}, {"lr": math.nan}, {"saturation": 0.3},
               {"saturation": "0.9"}, {"saturation": True}):
        add("ngd_outcomes", "argument", f"{kw}", lambda kw=kw: A.studies.ngd_outcomes(B4, **kw))
    for kinds in ("global", [], ["x"], [1, 2], None, ["global", "infeasible"]):
        add("outcome_counts", "kinds", f"kinds={kinds!r}", lambda k=kinds: A.studies.outcome_counts(k))
    for levels in ([], "0.9", [0.3], [True], [1.0], None):
        add("outcomes_by_threshold", "levels", f"levels={levels!r}",
            lambda lv=levels: A.studies.outcomes_by_threshold(B4, probs4, lv))
    for problem, probs in ((P, probs4[0]), (B4, probs4[:2]), (B4, "p"), ("P", probs4)):
        add("outcomes_by_threshold", "shape", f"{type(problem).__name__}, {str(probs)[:10]}",
            lambda q=problem, pr=probs: A.studies.outcomes_by_threshold(q, pr))
    for problem in (P, "P", None, B4.X):
        if not isinstance(problem, A.Problem):
            add("att_svm_feasible", "type", f"problem={type(problem).__name__}", lambda q=problem: A.att_svm_feasible(q))
    for args in ((100, 2, 2), (0, 2, 2), ("5", 5, 2), (5, 1, 2), (5, 5, 2.5)):
        add("a4_seed", "argument", f"{args}", lambda a=args: A.studies.a4_seed(*a))
    for args, kw in (((5, 5, 2, 5), {"init": "ones"}), ((5, 5, 2, 0), {}), ((5, 5, 2, 5), {"start": 5}),
                     ((5, 5, 2, 5), {"drawn": 3}), ((5, 5, 2, 5), {"saturation": 2.0}), ((0, 5, 2, 5), {}),
                     ((5, 5, 2, 5), {"steps": 0}), ((5, 5, 2, 5), {"lr": 0.0}), ((5, 5, 100, 5), {})):
        add("a4_runs", "argument", f"{args} {kw}", lambda a=args, kw=kw: A.studies.a4_runs(*a, **kw))
    for shapes, count, kw in (("ab", 2, {}), ([], 2, {}), ([(1,)], 2, {}), ([(2, 3)], 2, {"ds": "x"}),
                              ([(2, 3)], 2, {"ds": []}), ([(2, 3)], 0, {}), ([(2, 1)], 2, {}), ([(2, 3)], 2, {"init": 1})):
        add("a4_grid", "argument", f"{shapes!r} {count} {kw}", lambda s=shapes, c=count, kw=kw: A.studies.a4_grid(s, c, **kw))
    good4 = A.studies.outcome_counts(["global", "unsaturated"])
    for counts, kw in (({}, {}), ("x", {}), ({7: good4}, {}), ({2: {"N": 1}}, {}), ({2: good4}, {"keys": ("x",)}),
                       ({2: good4}, {"keys": "global"}), ({2: good4}, {"readoff": -1.0}),
                       ({2: good4}, {"readoff": math.nan}), ({2: "c"}, {}), ({2: good4}, {"keys": []})):
        add("a4_compare", "argument", f"{str(counts)[:20]} {kw}", lambda c=counts, kw=kw: A.studies.a4_compare(c, **kw))

    # the basin map (attnsvm.studies.basin)
    P1 = A.random_problem(1, 3, 2, generator=A.set_seed(9))
    u1 = torch.tensor([[1.0, 0.5], [-0.5, 2.0]], dtype=F64)
    ref1 = torch.tensor([1.0, 0.0], dtype=F64)
    for args in ((0.0, 4, [1.0]), (-1.0, 4, [1.0]), (math.nan, 4, [1.0]), ("1", 4, [1.0]), (1.0, 0, [1.0]),
                 (1.0, 2.5, [1.0]), (1.0, 4, []), (1.0, 4, [0.0]), (1.0, 4, [[1.0]]), (1.0, 4, "r"),
                 (1.0, 4, [math.nan])):
        add("polar_starts", "argument", f"{args}", lambda a=args: A.studies.polar_starts(*a))
    for u, ref in (("x", ref1), (u1, torch.zeros(2, dtype=F64)), (u1, torch.ones(3, dtype=F64)),
                   (torch.zeros(2, 2, dtype=F64), ref1), (torch.full((2, 2), math.nan, dtype=F64), ref1),
                   (u1, torch.ones(1, 2, dtype=F64)), (u1, None)):
        add("angle_between", "argument", f"{str(u)[:15]}, {str(ref)[:15]}", lambda u=u, r=ref: A.studies.angle_between(u, r))
    methods1 = {"NGD": ("ngd", 0.1)}
    for problem, u0, methods, kw in (
            (P, u1, methods1, {}), (B4, u1, methods1, {}), ("P", u1, methods1, {}),
            (P1, torch.ones(2, 3, dtype=F64), methods1, {}), (P1, torch.full((2, 2), math.nan, dtype=F64), methods1, {}),
            (P1, torch.ones(0, 2, dtype=F64), methods1, {}), (P1, u1, {}, {}), (P1, u1, "gd", {}),
            (P1, u1, {"x": ("adam", 0.1)}, {}), (P1, u1, {"x": ("gd",)}, {}), (P1, u1, {"x": ("gd", -1.0)}, {}),
            (P1, u1, methods1, {"steps": 0}), (P1, u1, methods1, {"saturation": 0.2})):
        add("basin_map", "argument", f"{type(problem).__name__} {str(methods)[:20]} {kw}",
            lambda q=problem, u=u0, m=methods, kw=kw: A.studies.basin_map(q, u, m, **kw))
    for problem, u0 in ((P, u1), (B4, u1), (P1, torch.ones(2, 3, dtype=F64)), (P1, "u"), (None, u1)):
        add("initial_gradient_norms", "argument", f"{type(problem).__name__} {str(u0)[:15]}",
            lambda q=problem, u=u0: A.studies.initial_gradient_norms(q, u))
    for alpha, kinds in ((torch.tensor([0.5, 1.0]), ["global", "global"]), (torch.tensor([0, 1]), ["global"]),
                         (torch.tensor([0, 1]), "gl"), (torch.zeros(2, 2, dtype=torch.long), ["global", "global"]),
                         ("a", ["global"]), (torch.tensor([True, False]), ["global", "global"])):
        add("basin_labels", "argument", f"{str(alpha)[:15]} {kinds!r}", lambda a=alpha, k=kinds: A.studies.basin_labels(a, k))
    ok1 = torch.tensor([True, False])
    for u, ref, succ, radii, step in ((u1, ref1, ok1.int(), [1.0], 0.1), (u1, ref1, ok1[:1], [1.0], 0.1),
                                      (u1, ref1, ok1, [1.0], 0.0), (u1, ref1, ok1, [1.0], 4.0),
                                      (u1, ref1, ok1, [1.0], math.nan), (u1, ref1, ok1, [], 0.1),
                                      (u1[0], ref1, ok1, [1.0], 0.1), (u1, torch.zeros(2, dtype=F64), ok1, [1.0], 0.1),
                                      (u1, ref1, "s", [1.0], 0.1), (u1, ref1, ok1, [[1.0]], 0.1)):
        add("empirical_cones", "argument", f"{str(succ)[:15]} {radii!r} {step!r}",
            lambda a=(u, ref, succ, radii, step): A.studies.empirical_cones(*a))
    for kw in ({"seed": -1}, {"seed": "2"}, {"draws": 0}, {"draws": 2.5}, {"min_gap": -1.0},
               {"min_gap": math.nan}, {"draws": 5, "min_gap": 10.0}):
        add("local_trap_instance", "argument", f"{kw}", lambda kw=kw: A.studies.local_trap_instance(**kw))
    for problem, count in ((P, 0), (P, "2"), (B4, 2), ("P", 2), (P, -1), (P, 2.5)):
        add("repeat_instance", "argument", f"{type(problem).__name__} {count!r}",
            lambda q=problem, c=count: A.studies.repeat_instance(q, c))
    return cases


def _skip_offsets() -> torch.Generator:
    """``A.set_seed(3)`` after :func:`attnsvm.studies.place_on_canvas` drew the offsets of 2 images of side
    4 on a canvas of side 4: the generator state at which it draws the noise."""
    g = A.set_seed(3)
    torch.randint(0, 1, (2, 2), generator=g)
    return g


def submodule_cases() -> list[tuple[str, str, str, Callable]]:
    """The path-study machinery (attnsvm.studies.path_study), translated digits (attnsvm.studies.digits) and
    next-token prediction (attnsvm.maxmargin.next_token)."""
    cases: list[tuple[str, str, str, Callable]] = []

    def add(entry, kind, what, thunk):
        cases.append((entry, kind, what, thunk))

    # --- path_study: small hand instances (see tests/studies/test_lib_path_study.py) ---
    X1 = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]], dtype=F64)      # n = 1, T = 2: margin of W is W[0, 0]
    P1 = A.Problem(X1, torch.ones(1, dtype=F64), torch.tensor([[1.0, 0.0]], dtype=F64), torch.tensor([1.0, 0.0], dtype=F64))
    X2 = torch.tensor([[[2.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [-1.0, 1.0]]], dtype=F64)
    P2 = A.Problem(X2, torch.ones(2, dtype=F64), torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64),
                   torch.tensor([1.0, 0.0], dtype=F64))
    B2 = A.random_problem(2, 3, 2, trials=2, generator=A.set_seed(21))
    e11 = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    svm2 = A.att_svm(P2.X, P2.Z, P2.opt)
    starts2 = torch.zeros(2, 2, 2, dtype=F64)

    for args in ((0, 2), (-1, 2), (2.5, 2), ("3", 2), (None, 2), (True, 2), (2, 0), (2, "2"), (2, 2.0)):
        add("random_starts", "size", f"{args}", lambda a=args: A.studies.random_starts(*a, A.set_seed(0)))
    for gen in (None, "seed", 5, torch.ones(2)):
        add("random_starts", "type", f"generator={str(gen)[:12]}", lambda g=gen: A.studies.random_starts(2, 2, g))
    for scale in (0.0, -1e-2, math.nan, math.inf, "0.01", None, True):
        add("random_starts", "scale", f"scale={scale!r}", lambda s=scale: A.studies.random_starts(2, 2, A.set_seed(0), s))
    for s in (1e300, 1e-300):
        add("random_starts", "extreme", f"scale={s:g}",
            checked(lambda s=s: A.studies.random_starts(3, 2, A.set_seed(4), s),
                    lambda r, s=s: _close(r, A.studies.random_starts(3, 2, A.set_seed(4), 1.0) * s, 1e-15)))

    for W in BAD_ARRAYS + [torch.full((2, 2), math.nan, dtype=F64), torch.ones(3, 3, dtype=F64), torch.ones(2, dtype=F64),
                           torch.ones(2, 0, 0, dtype=F64), torch.ones(0, 2, 2, dtype=F64), _with_bad_entry(e11, math.inf, random.Random(1))]:
        add("excess_loss", "W", f"W={str(W)[:20]}", lambda w=W: A.studies.excess_loss(w, P2))
    for problem in ("P", None, X2, A.WAttention(e11)):
        add("excess_loss", "type", f"problem={type(problem).__name__}", lambda q=problem: A.studies.excess_loss(e11, q))
    for alpha in ("a", [0, 2], [0.5, 1.0], [0], [0, 1, 1], 1, [-1, 0], [[0, 1], [1, 1], [0, 0]], [math.nan, 0]):
        add("excess_loss", "selection", f"alpha={alpha!r}", lambda a=alpha: A.studies.excess_loss(e11, P2, a))
    for loss in ("hinge", None, 3):
        add("excess_loss", "option", f"loss={loss!r}", lambda v=loss: A.studies.excess_loss(e11, P2, loss=v))
    loss0 = A.studies.excess_loss(svm2.W * 0, P2)          # on the ray of W^mm(opt): from L(0) - L* down to 0
    for s in (1e300, 1e-300):
        add("excess_loss", "extreme", f"W = {s:g} W^mm",
            checked(lambda s=s: A.studies.excess_loss(svm2.W * s, P2),
                    lambda r, s=s: float(r) == 0 if s > 1 else _close(r, loss0, 1e-12) and float(loss0) > 0))

    kinds2 = A.maxmargin.classify_selections(P2)
    for kinds in ("k", None, [("global", svm2)], {(0, 0): "global"}, {(0, 0): ("global", None)},
                  {(0, 0): ("global",)}, {(0, 0): ("infeasible", None)}, {}):
        add("candidate_directions", "kinds", f"{str(kinds)[:30]}", lambda k=kinds: A.studies.candidate_directions(k))
    add("candidate_directions", "extreme", "classify_selections of a hand instance",
        checked(lambda: A.studies.candidate_directions(kinds2),
                lambda r: r[0][0] == tuple(P2.opt.tolist()) and r[1][0] == "global"
                and _close(r[2][0], e11, 1e-6) and _close(torch.linalg.matrix_norm(r[2]), torch.ones(len(r[0]), dtype=F64), 1e-12)))

    gp = lambda q=P2, radii=(1.0, 2.0), st=starts2, D=e11[None], fresh=1.5: A.studies.global_path(q, list(radii), st, D,   # noqa: E731
                                                                                       fresh_from=fresh)
    for problem in ("P", None, X2, B2):
        add("global_path", "type", f"problem={type(problem).__name__}", lambda q=problem: gp(q=q))
    for st in BAD_ARRAYS + [torch.zeros(2, 2, dtype=F64), torch.zeros(2, 3, 3, dtype=F64), torch.zeros(0, 2, 2, dtype=F64),
                            torch.full((2, 2, 2), math.nan, dtype=F64), torch.zeros(1, 2, 2, 2, dtype=F64)]:
        add("global_path", "starts", f"starts={str(st)[:20]}", lambda s=st: gp(st=s))
    for D in BAD_ARRAYS + [e11, torch.zeros(0, 2, 2, dtype=F64), torch.zeros(1, 2, 2, dtype=F64),
                           torch.full((1, 2, 2), math.inf, dtype=F64), torch.ones(1, 3, 3, dtype=F64)]:
        add("global_path", "directions", f"directions={str(D)[:20]}", lambda d=D: gp(D=d))
    for radii in ([], [0.0, 1.0], [-1.0], [math.nan], [1.0, math.inf], "12", [[1.0]], [2.0, 1.0]):
        add("global_path", "radii", f"radii={radii!r}", lambda r=radii: gp(radii=r))
    for fresh in (0.0, -1.0, math.nan, math.inf, "1", None):
        add("global_path", "argument", f"fresh_from={fresh!r}", lambda f=fresh: gp(fresh=f))

    for problem in ("P", None, X2, B2):
        add("limit_offset", "type", f"problem={type(problem).__name__}", lambda q=problem: A.studies.limit_offset(q, svm2))
    for svm in (None, "svm", svm2.W, A.att_svm(P2.X, P2.Z, P2.opt, "nuc"), A.att_svm(P2.X, P2.Z, torch.tensor([1, 1])),
                A.att_svm(P1.X, P1.Z, P1.opt)):
        add("limit_offset", "svm", f"svm={str(svm)[:20]}", lambda s=svm: A.studies.limit_offset(P2, s))
    for loss in ("hinge", None, 1):
        add("limit_offset", "option", f"loss={loss!r}", lambda v=loss: A.studies.limit_offset(P2, svm2, v))
    t_exp = -1.0                                   # exponential loss: minimiser delta[1, 0] = -1 by hand
    add("limit_offset", "extreme", "hand instance, exponential loss",
        checked(lambda: A.studies.limit_offset(P2, svm2, "exponential"),
                lambda r: _close(r, torch.tensor([[0.0, 0.0], [t_exp, 0.0]], dtype=F64), 1e-7)))

    for curve in BAD_ARRAYS + [[], torch.zeros(2, 2), [0.1, math.nan], [math.inf, 0.0], 0.5, torch.zeros(0)]:
        add("dip", "curve", f"curve={str(curve)[:20]}", lambda c=curve: A.studies.dip(c))
    for s in SCALES:
        add("dip", "extreme", f"curve x {s:g}",
            checked(lambda s=s: A.studies.dip([0.5 * s, 0.9 * s, 0.7 * s, 0.8 * s, 1.0 * s]),
                    lambda r, s=s: abs(r[0] / s - 0.2) < 1e-12 and r[1:] == (2, 1)))
    for big in (1e308, 1.7e308):                   # the depth 2 * big overflows float64
        add("dip", "overflow", f"curve (+-{big:g})", lambda b=big: A.studies.dip([b, -b]))

    nuc1 = e11
    for it in BAD_ARRAYS + [torch.zeros(2, 2, dtype=F64), torch.full((2, 2), math.nan, dtype=F64), torch.eye(3, dtype=F64),
                            torch.zeros(0, 2, 2, dtype=F64), torch.stack([e11, 0 * e11])]:
        add("c_star_margin", "iterates", f"iterates={str(it)[:20]}", lambda i=it: A.studies.c_star_margin(i, P1, P1.opt, nuc1))
    for nuc in BAD_ARRAYS + [0 * e11, torch.stack([e11, e11]), torch.full((2, 2), math.nan, dtype=F64), torch.eye(3, dtype=F64)]:
        add("c_star_margin", "nuc", f"nuc={str(nuc)[:20]}", lambda v=nuc: A.studies.c_star_margin(e11, P1, P1.opt, v))
    for alpha in ("a", [2], [0.5], [0, 0], [[0], [0]], [-1]):
        add("c_star_margin", "selection", f"alpha={alpha!r}", lambda a=alpha: A.studies.c_star_margin(e11, P1, a, nuc1))
    for problem in ("P", None, X1):
        add("c_star_margin", "type", f"problem={type(problem).__name__}", lambda q=problem: A.studies.c_star_margin(e11, q, [0], nuc1))
    for s in SCALES:                               # scale-invariant in the iterates: 1, 1/2, 1/sqrt 2 by hand
        add("c_star_margin", "extreme", f"iterates x {s:g}",
            checked(lambda s=s: A.studies.c_star_margin(torch.stack([3 * e11, torch.eye(2, dtype=F64),
                                                             torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=F64)]) * s,
                                                P1, P1.opt, nuc1),
                    lambda r: _close(r, torch.tensor([1.0, 0.5, 2 ** -0.5], dtype=F64), 1e-12)))

    for problem in ("P", None, X2, B2):
        add("selection_table", "type", f"problem={type(problem).__name__}", lambda q=problem: A.studies.selection_table(q, P2.opt, svm2))
    for alpha in ("a", [0], [0, 2], [0.5, 1.0], [[0, 1]], None):
        add("selection_table", "selection", f"alpha={alpha!r}", lambda a=alpha: A.studies.selection_table(P2, a, svm2))
    for res in (None, "r", svm2.W, A.att_svm(P1.X, P1.Z, P1.opt)):
        add("selection_table", "res", f"res={str(res)[:20]}", lambda r=res: A.studies.selection_table(P2, P2.opt, r))
    add("selection_table", "extreme", "hand instance",
        checked(lambda: A.studies.selection_table(P2, P2.opt, svm2),
                lambda r: r.endswith("locally optimal per example: [True, True]") and r.count("\n") >= 5))

    # --- digits: images (n, h, h) with grey levels in [0, 1] ---
    img = torch.zeros(2, 4, 4, dtype=F64)
    img[0, 1, 2], img[1, 3, 0] = 1.0, 0.5
    lab = torch.tensor([1.0, -1.0], dtype=F64)
    for images in BAD_ARRAYS + [torch.zeros(2, 4, 3), torch.zeros(4, 4), torch.zeros(0, 4, 4), torch.zeros(2, 0, 0),
                                torch.zeros(1, 2, 4, 4), _with_bad_entry(img, math.nan, random.Random(2)),
                                _with_bad_entry(img, -math.inf, random.Random(3)), img.to(torch.complex128)]:
        add("patch_tokens", "images", f"images={str(images)[:20]}", lambda x=images: A.studies.patch_tokens(x, 2))
        add("place_on_canvas", "images", f"images={str(images)[:20]}", lambda x=images: A.studies.place_on_canvas(x, 8))
        add("translated_digits", "images", f"images={str(images)[:20]}",
            lambda x=images: A.studies.translated_digits(x, lab, 8, 4))
    for patch in (0, -2, 3, 5, 2.0, "2", None, True):
        add("patch_tokens", "size", f"patch={patch!r}", lambda p=patch: A.studies.patch_tokens(img, p))
    for position in ("no", 0, None, 1.0):
        add("patch_tokens", "type", f"position={position!r}", lambda p=position: A.studies.patch_tokens(img, 2, p))
    for s in SCALES:
        add("patch_tokens", "extreme", f"images x {s:g}",
            checked(lambda s=s: A.studies.patch_tokens(img * s, 2),
                    lambda r, s=s: r.shape == (2, 4, 8) and _close(r[..., :4], A.studies.patch_tokens(img, 2)[..., :4] * s, 0)
                    and bool((r[..., 4:] == torch.eye(4, dtype=F64)).all())))
    for canvas in (0, 3, -8, 8.0, "8", None, True):
        add("place_on_canvas", "size", f"canvas={canvas!r}", lambda c=canvas: A.studies.place_on_canvas(img, c))
    for noise in (-0.1, math.nan, math.inf, "0.2", None, True):
        add("place_on_canvas", "noise", f"noise={noise!r}", lambda v=noise: A.studies.place_on_canvas(img, 8, v))
    for gen in ("g", 0, torch.ones(1)):
        add("place_on_canvas", "type", f"generator={gen!r}", lambda g=gen: A.studies.place_on_canvas(img, 8, 0.2, g))
    add("place_on_canvas", "extreme", "noise 0: the images, at their offsets",
        checked(lambda: A.studies.place_on_canvas(img, 8, 0.0, A.set_seed(3)),
                lambda r: all(torch.equal(r[0][i, o[0]:o[0] + 4, o[1]:o[1] + 4], img[i])
                              and float(r[0][i].abs().sum()) == float(img[i].sum())
                              for i, o in enumerate(r[1].tolist()))))
    add("place_on_canvas", "extreme", "noise 1e300, canvas = image side",
        checked(lambda: A.studies.place_on_canvas(img, 4, 1e300, A.set_seed(3)),
                lambda r: bool(torch.isfinite(r[0]).all()) and not bool(r[1].any())
                and _close(r[0], 1e300 * torch.randn(2, 4, 4, generator=_skip_offsets(), dtype=F64) + img, 1e-15)))
    off = torch.tensor([[0, 4], [2, 1]])
    for offsets in BAD_ARRAYS + [off.double(), off.bool(), off[0], torch.zeros(2, 3, dtype=torch.long), off - 1, off + 4,
                                 torch.zeros(0, 2, dtype=torch.long)]:
        add("digit_patches", "offsets", f"offsets={str(offsets)[:20]}", lambda o=offsets: A.studies.digit_patches(o, 4, 8, 4))
    for args in ((0, 8, 4), (4, 8, 3), (4, 8, 0), (9, 8, 4), (4, "8", 4), (4, 8, 4.0), (4, 8, None), (True, 8, 4)):
        add("digit_patches", "size", f"digit, canvas, patch = {args!r}", lambda a=args: A.studies.digit_patches(off, *a))
    for images in ("x", torch.zeros(2, 3, 3), torch.zeros(3, 4, 4), torch.full((2, 4, 4), math.nan)):
        add("digit_patches", "images", f"images={str(images)[:20]}", lambda x=images: A.studies.digit_patches(off, 4, 8, 4, x))
    add("digit_patches", "extreme", "ink x 1e-300 (still ink)",
        checked(lambda: A.studies.digit_patches(off, 4, 8, 4, img * 1e-300),
                lambda r: r.tolist() == [[False, True, False, False], [False, False, True, False]]))
    for labels in BAD_ARRAYS + [torch.ones(3), torch.zeros(2), torch.tensor([1.0, math.nan]), torch.ones(2, 1), [1, 2]]:
        add("translated_digits", "labels", f"labels={str(labels)[:20]}", lambda y=labels: A.studies.translated_digits(img, y, 8, 4))
    for images in (img * 2, img - 0.5, img * 1e300):
        add("translated_digits", "images", f"grey levels up to {float(images.max()):g}",
            lambda x=images: A.studies.translated_digits(x, lab, 8, 4))
    for kw in ({"canvas": 6}, {"canvas": 2, "patch": 2}, {"canvas": 8, "patch": 8}, {"canvas": 8, "patch": 3},
               {"patch": 0}, {"noise": -1.0}, {"noise": math.nan}, {"generator": 3}, {"canvas": "8"}):
        add("translated_digits", "argument", f"{kw}", lambda kw=kw: A.studies.translated_digits(img, lab, **{"canvas": 8, "patch": 4, **kw}))
    add("translated_digits", "extreme", "noise 0, canvas 8, patch 4",
        checked(lambda: A.studies.translated_digits(img, lab, 8, 4, 0.0, A.set_seed(5)),
                lambda r: r.X.shape == (2, 4, 20) and torch.equal(r.Z, r.X.mean(1)) and torch.equal(r.Y, lab)
                and torch.equal(r.on_ink, A.studies.digit_patches(r.offsets, 4, 8, 4, img))
                and abs(float(r.canvases.sum()) - 1.5) < 1e-15))

    # --- next_token: m = 2 contexts, V = 3 tokens, d = 2 ---
    H = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
    Pn = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]], dtype=F64)
    data = A.maxmargin.ntp_data(H, Pn)
    W0 = torch.zeros(3, 2, dtype=F64)
    for Hb in BAD_ARRAYS + [torch.ones(2), torch.ones(3, 2), torch.ones(2, 0), torch.ones(2, 2, 1),
                            _with_bad_entry(H, math.nan, random.Random(4)), torch.ones(2, 2), H.to(torch.complex128)]:
        add("ntp_data", "H", f"H={str(Hb)[:20]}", lambda h=Hb: A.maxmargin.ntp_data(h, Pn))
    for Pb in BAD_ARRAYS + [Pn[:, :1] * 0 + 1, torch.ones(0, 3), Pn[0], Pn * 2, Pn - 0.25 * (Pn > 0.5),
                            _with_bad_entry(Pn, math.inf, random.Random(5)), torch.tensor([[1.5, -0.5, 0.0], [0.0, 0.0, 1.0]])]:
        add("ntp_data", "P", f"P={str(Pb)[:20]}", lambda p=Pb: A.maxmargin.ntp_data(H, p))
    for pi in [v for v in BAD_ARRAYS if v is not None] + [[0.5], [1.0, 0.0], [0.7, 0.7], [math.nan, 1.0], [[0.5, 0.5]], [1.5, -0.5]]:
        add("ntp_data", "pi", f"pi={pi!r}"[:30], lambda p=pi: A.maxmargin.ntp_data(H, Pn, p))
    add("ntp_data", "empty size", "m = 0", lambda: A.maxmargin.ntp_data(torch.ones(0, 2), torch.ones(0, 3)))
    for s in SCALES:
        add("ntp_data", "extreme", f"H x {s:g}",
            checked(lambda s=s: A.maxmargin.ntp_data(H * s, Pn),
                    lambda r: abs(r.entropy - data.entropy) < 1e-15 and torch.equal(r.pi, data.pi)))
        add("ntp_loss", "extreme", f"H x {s:g}, W = 0: log V",
            checked(lambda s=s: A.maxmargin.ntp_loss(W0, A.maxmargin.ntp_data(H * s, Pn)), lambda r: abs(float(r) - math.log(3)) < 1e-15))
        add("ntp_finite_part", "extreme", f"H x {s:g}",
            checked(lambda s=s: A.maxmargin.ntp_finite_part(A.maxmargin.ntp_data(H * s, Pn)),
                    lambda r, s=s: _close(r * s, A.maxmargin.ntp_finite_part(data), 1e-9)))
        add("ntp_svm", "extreme", f"H x {s:g}",
            checked(lambda s=s: A.ntp_svm(A.maxmargin.ntp_data(H * s, Pn)),
                    lambda r, s=s: _close(r * s, A.ntp_svm(data), 1e-6)))
        add("ntp_project", "extreme", f"W x {s:g}",
            checked(lambda s=s: A.maxmargin.ntp_project(A.ntp_svm(data) * s + A.maxmargin.ntp_finite_part(data) * s, data),
                    lambda r, s=s: _close(r[0], A.maxmargin.ntp_finite_part(data) * s, 1e-9) and _close(r[1], A.ntp_svm(data) * s, 1e-9)))
    stack = torch.stack([W0, W0 + 1.0])
    add("ntp_project", "extreme", "a stack of decoders", checked(
        lambda: A.maxmargin.ntp_project(stack, data),
        lambda r: all(_close(r[0][k], A.maxmargin.ntp_project(stack[k], data)[0], 1e-12) for k in range(2))))
    for bad in ("data", None, (H, Pn), H, A.random_problem(2, 3, 2, generator=A.set_seed(0))):
        add("ntp_loss", "type", f"data={type(bad).__name__}", lambda b=bad: A.maxmargin.ntp_loss(W0, b))
        add("ntp_finite_part", "type", f"data={type(bad).__name__}", lambda b=bad: A.maxmargin.ntp_finite_part(b))
        add("ntp_svm", "type", f"data={type(bad).__name__}", lambda b=bad: A.ntp_svm(b))
        add("ntp_project", "type", f"data={type(bad).__name__}", lambda b=bad: A.maxmargin.ntp_project(W0, b))
        add("ntp_gradient_descent", "type", f"data={type(bad).__name__}", lambda b=bad: A.maxmargin.ntp_gradient_descent(b, 5, 1.0))
    for W in BAD_ARRAYS + [torch.zeros(2, 3), torch.zeros(3), torch.zeros(1, 3, 2), torch.full((3, 2), math.nan),
                           _with_bad_entry(W0, math.inf, random.Random(6))]:
        add("ntp_loss", "W", f"W={str(W)[:20]}", lambda w=W: A.maxmargin.ntp_loss(w, data))
        if not (isinstance(W, torch.Tensor) and tuple(W.shape) == (1, 3, 2)):   # a stack of one: valid
            add("ntp_project", "W", f"W={str(W)[:20]}", lambda w=W: A.maxmargin.ntp_project(w, data))
        if W is not None:                              # None = start from zeros
            add("ntp_gradient_descent", "W0", f"W0={str(W)[:20]}", lambda w=W: A.maxmargin.ntp_gradient_descent(data, 5, 1.0, w))
    add("ntp_svm", "infeasible", "every context followed by every token",
        lambda: A.ntp_svm(A.maxmargin.ntp_data(H, torch.full((2, 3), 1 / 3, dtype=F64))))
    add("ntp_svm", "infeasible", "not NTP-separable", lambda: A.ntp_svm(A.maxmargin.ntp_data(torch.tensor([[1.0], [2.0]]),
                                                                                  torch.tensor([[1.0, 0.0], [0.0, 1.0]]))))
    add("ntp_finite_part", "infeasible", "not NTP_H-compatible",
        lambda: A.maxmargin.ntp_finite_part(A.maxmargin.ntp_data(torch.tensor([[1.0], [2.0]]), torch.tensor([[0.5, 0.5], [0.25, 0.75]]))))
    for steps in (0, -1, 2.5, "5", None, True):
        add("ntp_gradient_descent", "size", f"steps={steps!r}", lambda k=steps: A.maxmargin.ntp_gradient_descent(data, k, 1.0))
    for lr in (0.0, -1.0, math.nan, math.inf, "1", None):
        add("ntp_gradient_descent", "step", f"lr={lr!r}", lambda v=lr: A.maxmargin.ntp_gradient_descent(data, 5, v))
    for log_steps in ("abc", [], [9], [-1], [1.5], [[0, 1]], [math.nan], 3, [0, "1"], {"a": 1}):
        add("ntp_gradient_descent", "log_steps", f"log_steps={log_steps!r}",
            lambda v=log_steps: A.maxmargin.ntp_gradient_descent(data, 5, 1.0, log_steps=v))
    for lr in (1e300, 1e305):                      # a huge step oscillates, finitely: the loss stays >= the entropy
        add("ntp_gradient_descent", "extreme", f"lr={lr:g}",
            checked(lambda v=lr: A.maxmargin.ntp_gradient_descent(data, 50, v),
                    lambda r: bool(torch.isfinite(r.iterates).all()) and r.loss.dtype == F64
                    and bool((r.loss >= data.entropy - 1e-12).all())))
    add("ntp_gradient_descent", "overflow", "W0 = -1.7e308, lr = 1e308: the first step overflows",
        lambda: A.maxmargin.ntp_gradient_descent(data, 5, 1e308, torch.full((3, 2), -1.7e308, dtype=F64)))
    add("ntp_data", "extreme", "float32 and integer inputs are read as float64",
        checked(lambda: A.maxmargin.ntp_data(torch.eye(2, dtype=torch.int64), torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 1.0]]),
                                   torch.tensor([0.5, 0.5])),
                lambda r: r.H.dtype == r.P.dtype == r.pi.dtype == F64 and torch.equal(r.P, Pn)))
    add("ntp_gradient_descent", "extreme", "lr 1e-300: W stays at W0 to the last digit",
        checked(lambda: A.maxmargin.ntp_gradient_descent(data, 3, 1e-300, log_steps=[0, 3]),
                lambda r: r.steps.tolist() == [0, 3] and _close(r.loss, torch.full((2,), math.log(3), dtype=F64), 1e-15)
                and float(r.iterates[-1].abs().max()) < 1e-299))
    return cases


ENTRY_POINTS = {
    "Problem": problem_cases,
    "random_problem / figure_problem": generator_cases,
    "attention classes": attention_cases,
    "att_svm / p_svm": svm_cases,
    "train / regularization_path": training_cases,
    "methods and helpers": method_cases,
}


def _case_modules() -> list:
    """The ``tests/fuzz_cases_*.py`` modules (one per library module), in name order."""
    import importlib

    return [importlib.import_module(path.stem)
            for path in sorted(Path(__file__).resolve().parent.glob("fuzz_cases_*.py"))]


def module_cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    """The cases of every case module: its ``cases(rng)`` returns ``(entry, kind, what, thunk)``
    tuples built with the helpers above."""
    return [case for module in _case_modules() for case in module.cases(rng)]


def module_exempt() -> set[str]:
    """Public names a case module declares input-free (its optional ``EXEMPT`` set: constants and
    the result containers its functions build), for tests/fuzz/test_fuzz.py."""
    return {name for module in _case_modules() for name in getattr(module, "EXEMPT", ())}


def all_cases(seed: int = 0) -> list[tuple[str, str, str, Callable]]:
    rng = random.Random(seed)
    return [(entry, kind, what, thunk) for entry, make in ENTRY_POINTS.items()
            for kind, what, thunk in make(rng)] + newer_cases(rng) + module_cases(rng)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    table: Counter = Counter()
    bad = []
    for entry, kind, what, thunk in all_cases():
        result = outcome(thunk)
        table[(entry, kind, result)] += 1
        if result not in ("clear", "correct"):
            bad.append(f"{result:8s} {entry}: {what}")
    totals = Counter(r for (_, _, r), c in table.items() for _ in range(c))
    print(f"{sum(table.values())} cases: {dict(totals)}")
    for (entry, kind, result), count in sorted(table.items()):
        if result not in ("clear", "correct"):
            print(f"  {entry:32s} {kind:22s} {result:8s} {count}")
    print("\n".join(bad))
