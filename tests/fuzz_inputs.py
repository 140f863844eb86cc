"""A deterministic fuzz of bad inputs to the public API (used by tests/test_fuzz.py).

Every case is a call that must be refused: the library itself must raise ``ValueError`` (or
``TypeError`` for a wrong type) naming what is wrong, before doing any work. An outcome is
``clear`` (ValueError/TypeError raised from a frame of the attnsvm package), ``unclear`` (any other
exception, or one raised from inside torch, NumPy or cvxpy) or ``silent`` (no exception: a
wrong answer). ``python tests/fuzz_inputs.py`` prints the counts by entry point and class.
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


def outcome(thunk: Callable[[], object]) -> str:
    try:
        thunk()
    except (ValueError, TypeError) as error:
        frames = traceback.extract_tb(error.__traceback__)
        return "clear" if str(Path(frames[-1].filename).resolve()).startswith(PACKAGE) else "unclear"
    except Exception:                                            # noqa: BLE001
        return "unclear"
    return "silent"


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
    cases.append(("type", "classify_selections(tensor)", lambda: A.classify_selections(P.X)))
    cases.append(("type", "selection_kind(tensor)", lambda: A.selection_kind(P.X, [0, 0])))
    for value in (P.X, "P", None):
        cases.append(("type", f"optimal_risk({type(value).__name__})", lambda v=value: A.optimal_risk(v)))
        cases.append(("type", f"excess_risk(problem={type(value).__name__})",
                      lambda v=value: A.excess_risk(W, v)))
        cases.append(("type", f"excess_risk(attention={type(value).__name__})",
                      lambda v=value: A.excess_risk(v, P)))
    for value in ("hinge", None, 3):
        cases.append(("option", f"optimal_risk(loss={value!r})", lambda v=value: A.optimal_risk(P, v)))
        cases.append(("option", f"excess_risk(loss={value!r})", lambda v=value: A.excess_risk(W, P, v)))
    cases.append(("head", "excess_risk of a prompt model with a wrong d",
                  lambda: A.excess_risk(A.PromptAttention(torch.ones(3, dtype=F64)), P)))
    probs = torch.full((3, 2, 3), 1 / 3, dtype=F64)
    for value, saturation in ((probs[:2], 0.99), (probs.flatten(1), 0.99), (torch.full_like(probs, math.nan), 0.99),
                              ("probs", 0.99), (probs, 0.5), (probs, 1.0), (probs, math.nan), (probs, "0.9")):
        cases.append(("outcomes", f"run_outcomes({type(value).__name__}, saturation={saturation!r})",
                      lambda v=value, s=saturation: A.run_outcomes(B, v, s)))
    cases.append(("type", "run_outcomes(problem=tensor)", lambda: A.run_outcomes(B.X, probs)))
    cases.append(("shape", "run_outcomes on one instance", lambda: A.run_outcomes(P, probs[0])))
    for count, total in ((-1, 10), (11, 10), (0, 0), (True, 4), (1.5, 4), ("1", 4), (1, math.nan), (None, 3)):
        cases.append(("count", f"proportion_interval({count!r}, {total!r})",
                      lambda c=count, t=total: A.proportion_interval(c, t)))
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
                      lambda s=probs: A.finite_part(P.X, P.Z, mask, s)))
    for args in ((torch.ones(4, 4), torch.zeros(4, 4), torch.zeros(4, 4)),
                 (torch.ones(4, 4), torch.zeros(3, 3), torch.ones(4, 4)),
                 (torch.full((4, 4), math.nan), torch.zeros(4, 4), torch.ones(4, 4)), ("W", 0, 0)):
        cases.append(("fit", "svm_eq_fit bad", lambda a=args: A.svm_eq_fit(*a)))
    for args in ((P.X, torch.tensor([1.0, 0.0], dtype=F64), [0, 0]), (P.X, torch.ones(3, dtype=F64), [0, 0]),
                 (P.X, P.Y, [0, 5]), (P.X[0], P.Y, [0, 0]), ("X", P.Y, [0, 0]),
                 (torch.full_like(P.X, math.nan), P.Y, [0, 0])):
        cases.append(("labels", "v_svm bad", lambda a=args: A.v_svm(*a)))
    for args in ((P.X, [0, 0], torch.tensor([1, 0])), (P.X, [0, 0], torch.tensor([True])),
                 (P.X, [0, 0], "S"), (P.X, [0, 9], torch.tensor([True, True])),
                 (P.X[0], [0, 0], torch.tensor([True, True]))):
        cases.append(("sets", "relaxed_p_svm bad", lambda a=args: A.relaxed_p_svm(*a)))
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
    for norm in (0.5, "nuc", math.nan, math.inf, True, None, -2):
        cases.append(("norm", f"norm_svm(norm={norm!r})", lambda q=norm: A.norm_svm(P.X, P.Z, P.opt, q)))
    cases.append(("norm", "norm_svm spectral diagonal", lambda: A.norm_svm(P.X, P.Z, P.opt, "spectral", diagonal=True)))
    cases.append(("type", "norm_svm diagonal='yes'", lambda: A.norm_svm(P.X, P.Z, P.opt, 2, diagonal="yes")))
    cases.append(("norm", "matrix_norm(norm=0)", lambda: A.matrix_norm(torch.ones(2, 2), 0)))
    for value in (1.0, 0.5, math.nan, math.inf, "3", None):
        cases.append(("step", f"train mirror p={value!r}", lambda v=value: A.train(W, P, 2, method="mirror", p=v)))
    cases.append(("step", "train mirror with max_step", lambda: A.train(W, P, 2, method="mirror", max_step=1.0)))
    for k, q in ((torch.ones(3, dtype=F64), torch.ones(4, dtype=F64)), (torch.tensor(1.0), torch.tensor(1.0)),
                 ("k", "q"), (torch.full((4,), math.nan, dtype=F64), torch.ones(4, dtype=F64))):
        cases.append(("shape", "DiagonalAttention bad", lambda a=k, b=q: A.DiagonalAttention(a, b)))
    for index in (3, "0", None, slice(5, 9), torch.tensor([7]), [[0, 1]]):
        cases.append(("index", f"select({index!r})", lambda i=index: B.select(i)))
    cases.append(("index", "select on one instance", lambda: P.select(slice(1))))
    for alpha in (B.opt[:2], "a", B.opt[:, :1]):
        cases.append(("selection", "svm_stack(alpha bad)", lambda a=alpha: A.svm_stack(B, a)))
    cases.append(("type", "svm_stack(tensor)", lambda: A.svm_stack(B.X, B.opt)))
    cases.append(("shape", "svm_stack on one instance", lambda: A.svm_stack(P, P.opt)))
    cases.append(("reference", "train: zero reference",
                  lambda: A.train(A.WAttention.zeros(4), P, 3, reference=torch.zeros(4, 4))))
    return cases


ENTRY_POINTS = {
    "Problem": problem_cases,
    "random_problem / figure_problem": generator_cases,
    "attention classes": attention_cases,
    "att_svm / p_svm": svm_cases,
    "train / regularization_path": training_cases,
    "methods and helpers": method_cases,
}


def all_cases(seed: int = 0) -> list[tuple[str, str, str, Callable]]:
    rng = random.Random(seed)
    return [(entry, kind, what, thunk) for entry, make in ENTRY_POINTS.items()
            for kind, what, thunk in make(rng)]


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    table: Counter = Counter()
    bad = []
    for entry, kind, what, thunk in all_cases():
        result = outcome(thunk)
        table[(entry, kind, result)] += 1
        if result != "clear":
            bad.append(f"{result:8s} {entry}: {what}")
    totals = Counter(r for (_, _, r), c in table.items() for _ in range(c))
    print(f"{sum(table.values())} cases: {dict(totals)}")
    for (entry, kind, result), count in sorted(table.items()):
        if result != "clear":
            print(f"  {entry:32s} {kind:22s} {result:8s} {count}")
    print("\n".join(bad))
