"""GPU check: the library on CUDA against the library on CPU, then the heavy studies timed on both.

``make gpu-check`` runs this script. On a CUDA device it

1. runs every public solver, ``train`` (W, (K, Q) and p parameterizations; each method: gd, ngd,
   polyak, mirror, spectral), the regularization path (W, (K, Q), p; with a reference and random
   restarts) and the risk functions on the CPU and on the device, from the same seed, in float64,
   and prints the largest relative difference per function: ``max |cpu - dev| / max |cpu|`` over
   every output of the function (integer and boolean outputs: the share of entries that differ).
   A row above ``--tol`` (default 1e-6) is flagged, and so is a function that fails on the device,
   unless the function is ill-conditioned (:func:`verdict`): rerun on the CPU with every drawn
   input moved by one unit in the last place (``SPREAD_RUNS`` draws), each output above the
   tolerance spreads by at least 1 / ``SPREAD_FACTOR`` of the device's difference in it. Long
   training runs amplify rounding that way (300 steps of Polyak or spectral descent, or of (K, Q)
   training: 1e-3 to 1e-1 in the parameters), so every training method is also compared after
   ``SHORT`` steps, where they are not, at the tolerance and without that exemption;
2. times the book's heavy studies on the CPU and on the device, side by side, with the ratio
   CPU time / device time (> 1: the device is faster): A3 training (n=6, T=8, d=10, 100 runs,
   2000 NGD steps, W and (K, Q)), an A4 grid (NGD, 2000 steps, W(0) = 0, 100 runs per cell), the
   A6 closed form ``ngd_relu_head`` (2048 runs, d=10, 2000 steps) and a batch of Att-SVM solves
   (A5: 100 instances, Frobenius and nuclear). Each side runs once untimed at a tiny size first
   (CUDA start-up, solver compilation). The CPU side uses torch's default thread count (printed).

Exit status: 0 when every compared function agrees within ``--tol``, 1 otherwise. On a machine
without CUDA it prints one line saying so and exits 0 (nothing was checked).

``--device cpu`` runs the same machinery CPU against CPU (a self-test of this script: every
difference must be 0); ``--quick`` uses small sizes (the self-test takes seconds); ``--no-timing``
skips part 2. The script uses only the public ``attnsvm`` API; random draws are made on the CPU
and moved, so both sides see identical inputs.

Usage:  python tools/gpu_check.py                      # CUDA vs CPU, full sizes (a few minutes)
        python tools/gpu_check.py --quick              # CUDA vs CPU, small sizes
        python tools/gpu_check.py --device cpu --quick # self-test on any machine
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Callable

import torch

import attnsvm as A
from gpu_compare import SPREAD_FACTOR, SPREAD_RUNS, cpu_spread, jitter, output_differences, verdict

F64 = torch.float64
SHORT = 10            # steps of the short training runs, compared before rounding differences grow
SHORT_SUFFIX = f", {SHORT} steps"


# --- inputs (drawn on the CPU from fixed seeds, then moved) --------------------------------------

def problem(device: str, n: int = 6, T: int = 8, d: int = 10, trials: int | None = None,
            seed: int = 0) -> A.Problem:
    P = A.random_problem(n, T, d, trials=trials, generator=A.set_seed(seed))
    return A.Problem(jitter(P.X), P.Y, jitter(P.Z), jitter(P.v), P.mask).to(device)


def gaussian(*shape: int, seed: int, scale: float = 1.0, device: str = "cpu") -> torch.Tensor:
    return jitter(scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                                      dtype=F64)).to(device)


def attention(kind: str, device: str, d: int, trials: int, seed: int = 1):
    if kind == "W":
        return A.WAttention(gaussian(trials, d, d, seed=seed, scale=0.01, device=device))
    if kind == "KQ":
        return A.KQAttention(gaussian(trials, d, d, seed=seed, scale=0.1, device=device),
                             gaussian(trials, d, d, seed=seed + 1, scale=0.01, device=device))
    return A.PromptAttention(gaussian(trials, d, seed=seed, scale=0.01, device=device))


# --- the compared functions ----------------------------------------------------------------------

def solver_cases(quick: bool) -> dict[str, Callable[[str], object]]:
    small = dict(n=4, T=3, d=4)

    def att(norm):
        def run(dev):
            P = problem(dev)
            r = A.att_svm(P.X, P.Z, P.opt, norm)
            return {"W": r.W, "margins": r.margins, "objective": r.objective}
        return run

    def sets(P):
        S = torch.nn.functional.one_hot(P.opt, P.T).bool()
        S[0, (P.opt[0] + 1) % P.T] = True                     # one example keeps two tokens
        return S

    def probabilities(P, S):
        logits = gaussian(P.n, P.T, seed=5, device=str(P.X.device))
        return torch.softmax(torch.where(S, logits, logits - 30.0), dim=-1)

    def gen(dev):
        P = problem(dev, **small)
        r = A.gen_svm(P.X, P.Z, sets(P))
        return {"W": r.W, "objective": r.objective, "support": r.support}

    def finite(dev):
        P = problem(dev, **small)
        S = sets(P)
        return A.maxmargin.finite_part(P.X, P.Z, S, probabilities(P, S))

    def eq_fit(dev):
        W, W_fin, W_dir = (gaussian(3, 4, 4, seed=s, device=dev) for s in (6, 7, 8))
        C, fit = A.maxmargin.svm_eq_fit(W, W_fin[0], W_dir[0])
        return {"C": C, "fit": fit}

    def selected(dev):
        P = problem(dev, **small)
        S = sets(P)
        return A.maxmargin.selected_sets(probabilities(P, S))

    def p_svm(dev):
        P = problem(dev, n=4, T=3, d=8)                       # one vector p: few constraints
        r = A.p_svm(P.X, P.opt)
        return {"p": r.W, "margins": r.margins}

    def v_svm(dev):
        P = problem(dev, n=4, T=3, d=8)
        r = A.maxmargin.v_svm(P.X, P.Y, P.opt)
        return {"v": r.W, "margins": r.margins, "support": r.support}

    def relaxed(dev):
        P = problem(dev, n=4, T=3, d=8)
        supported = A.maxmargin.v_svm(P.X, P.Y, P.opt).support.reshape(-1)
        r = A.maxmargin.relaxed_p_svm(P.X, P.opt, supported)
        return {"p": r.W, "margins": r.margins}

    def norm(p, diagonal=False):
        def run(dev):
            P = problem(dev, **small)
            r = A.norm_svm(P.X, P.Z, P.opt, p, diagonal=diagonal)
            return {"W": r.W, "objective": r.objective}
        return run

    def matrix_norm(dev):
        W = gaussian(4, 4, seed=9, device=dev)
        return [A.maxmargin.matrix_norm(W, p) for p in (1, 1.5, 3, "spectral")]

    def features(dev):
        P = problem(dev)
        return A.maxmargin.constraint_features(P.X, P.Z, P.opt)

    def kkt(dev):
        P = problem(dev)
        r = A.att_svm(P.X, P.Z, P.opt)
        lam, residual = A.maxmargin.kkt_multipliers(P.X, P.Z, P.opt, r)
        return {"lambda": lam, "residual": residual}

    def local(dev):
        P = problem(dev)
        return A.is_locally_optimal(P, P.opt, A.att_svm(P.X, P.Z, P.opt))

    def stack(norm):
        def run(dev):
            B = problem(dev, trials=3)
            return A.maxmargin.svm_stack(B, B.opt, norm)
        return run

    def cache(dev):
        B = problem(dev, trials=2)
        return A.maxmargin.SVMCache().stack(B, B.opt)

    def relu(dev):
        X, Y, Z, V, W0 = A.studies.a6_draw(8, 6, A.set_seed(3))
        X, Z, V, W0 = (jitter(t) for t in (X, Z, V, W0))
        X, Y, Z, V, W0 = (t.to(dev) for t in (X, Y, Z, V, W0))
        beta = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=50 if quick else 300, lr=0.1, every=10)
        return {"beta": beta, "W": A.studies.span_iterates(beta[-1], X, Z, W0)}

    def outcomes(dev):
        B = problem(dev, trials=4)
        att = attention("W", dev, 10, 4)
        A.train(att, B, 30, 0.1, log_every=30)
        alpha, kinds = A.maxmargin.run_outcomes(B, att.probabilities(B))
        return {"alpha": alpha, "kinds": torch.tensor([A.maxmargin.OUTCOMES.index(k) for k in kinds])}

    return {"att_svm (fro)": att("fro"), "att_svm (nuc)": att("nuc"), "p_svm": p_svm,
            "gen_svm": gen, "finite_part": finite, "svm_eq_fit": eq_fit, "selected_sets": selected,
            "v_svm": v_svm, "relaxed_p_svm": relaxed, "norm_svm (l3)": norm(3),
            "norm_svm (l3, diagonal)": norm(3, True), "norm_svm (spectral)": norm("spectral"),
            "matrix_norm": matrix_norm, "constraint_features": features,
            "kkt_multipliers": kkt, "is_locally_optimal": local, "svm_stack (fro)": stack("fro"),
            "svm_stack (nuc)": stack("nuc"), "SVMCache.stack": cache,
            "ngd_relu_head + span_iterates": relu, "run_outcomes": outcomes}


def model_cases(quick: bool) -> dict[str, Callable[[str], object]]:
    trials = 4 if quick else 16
    steps = 40 if quick else 300

    def risks(kind):
        def run(dev):
            B = problem(dev, trials=trials)
            att = attention(kind, dev, 10, trials, seed=4)
            with torch.no_grad():
                for p in att.params:
                    p.mul_(300.0)                             # a saturated softmax
            return {"risk": A.empirical_risk(att, B), "predict": A.predict(att, B),
                    "excess": A.excess_risk(att, B), "optimal": A.model.optimal_risk(B),
                    "probs": att.probabilities(B)}
        return run

    def training(kind, method, steps=steps):
        def run(dev):
            B = problem(dev, trials=trials)
            att = attention(kind, dev, 10, trials)
            extra = {"p": 3.0} if method == "mirror" else {}
            if method == "polyak":
                extra = {"max_step": 10.0}
            hist = A.train(att, B, steps, 0.1, method, log_every=max(1, steps // 4), **extra)
            return {"params": att.combined(), "loss": hist.loss, "norm": hist.norm}
        return run

    def mlp(dev):
        B = problem(dev, trials=trials)
        V = gaussian(trials, 10, 10, seed=11, device=dev)
        att = attention("W", dev, 10, trials)
        hist = A.train(att, B, steps, 0.1, "ngd", head=A.MLPHead(V), log_every=steps)
        return {"params": att.combined(), "loss": hist.loss}

    def path(kind, **options):
        def run(dev):
            B = problem(dev, n=3, T=3, d=3, trials=3)
            att = attention(kind, dev, 3, 3)
            radii = [1.0, 4.0, 16.0] if kind != "KQ" else [20.0, 60.0]
            if "reference" in options:
                options["reference"] = A.maxmargin.svm_stack(B, B.opt).to(dev)
            r = A.regularization_path(att, B, radii, steps=30 if quick else 150, warn=False,
                                      **options)
            out = {"iterates": r.iterates, "loss": r.loss, "start": r.start}
            if r.restart_corr is not None:
                out["restart_corr"] = r.restart_corr
            return out
        return run

    cases = {f"empirical_risk/predict/excess_risk ({k})": risks(k) for k in ("W", "KQ", "p")}
    for kind in ("W", "KQ", "p"):
        for method in ("gd", "ngd", "polyak", "mirror", "spectral"):
            cases[f"train ({kind}, {method})"] = training(kind, method)
            cases[f"train ({kind}, {method}){SHORT_SUFFIX}"] = training(kind, method, SHORT)
    cases["train (W, ngd, MLPHead)"] = mlp
    for kind in ("W", "KQ", "p"):
        cases[f"regularization_path ({kind})"] = path(kind)
    cases["regularization_path (W, reference, restarts=2)"] = path("W", reference=True, restarts=2,
                                                                    seed=0)
    return cases


def compare(device: str, quick: bool, tol: float) -> tuple[list[list[str]], bool]:
    rows, ok = [], True
    cases = {**solver_cases(quick), **model_cases(quick)}
    for name, case in cases.items():
        try:
            start = time.perf_counter()
            reference = case("cpu")
            cpu_s = time.perf_counter() - start
        except Exception as error:                            # noqa: BLE001 (reported, not hidden)
            rows.append([name, "-", "-", f"ERROR on cpu: {type(error).__name__}: {str(error)[:60]}", "-"])
            ok = False
            continue
        try:
            start = time.perf_counter()
            other = case(device)
            _sync(device)
            dev_s = time.perf_counter() - start
        except Exception as error:                            # noqa: BLE001
            rows.append([name, "-", "-", f"ERROR on {device}: {type(error).__name__}: {str(error)[:60]}",
                         f"{cpu_s:.2f} / -"])
            ok = False
            continue
        diffs = output_differences(reference, other) or [0.0]       # [] only for a result with no output
        spreads, flag = None, "ok"
        if max(diffs) > tol:
            try:
                spreads = cpu_spread(case, reference)
                flag = verdict(diffs, spreads, tol, exempt=not name.endswith(SHORT_SUFFIX))
            except Exception as error:                        # noqa: BLE001
                flag = f"ERROR in a 1-ulp rerun on cpu: {type(error).__name__}: {str(error)[:40]}"
        ok &= flag.startswith("ok")
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        rows.append([name, f"{diffs[worst]:.1e}", "-" if spreads is None else f"{spreads[worst]:.1e}",
                     flag, f"{cpu_s:.2f} / {dev_s:.2f}"])
    return rows, ok


# --- timing the heavy studies --------------------------------------------------------------------

def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def studies(quick: bool) -> list[tuple[str, str, Callable[[str, bool], None]]]:
    """(name, size, run(device, tiny)): ``tiny`` runs a minimal version (the warm-up)."""
    runs, steps = (10, 50) if quick else (100, 2000)
    grid_shapes = [(5, 5)] if quick else [(5, 5), (6, 8)]
    grid_d = [2, 10] if quick else [2, 3, 4, 5, 10, 20]
    grid_runs = 10 if quick else 100
    a6_runs = 64 if quick else 2048
    svm_count, svm_shape = (2, (4, 3, 4)) if quick else (100, (6, 8, 10))

    def a3(kind):
        def run(dev, tiny):
            count, k = (2, 2) if tiny else (runs, steps)
            P = A.random_problem(6, 8, 10, trials=count, generator=A.set_seed(0)).to(dev)
            if kind == "W":
                att = A.WAttention.zeros(10, count, device=dev)
            else:
                att = A.KQAttention.init(10, trials=count, generator=A.set_seed(1), device=dev)
            A.train(att, P, k, 0.1, "ngd", log_every=max(k, 1))
        return run

    def a4(dev, tiny):
        shapes, ds, count, k = ([(5, 5)], [2], 2, 2) if tiny else (grid_shapes, grid_d, grid_runs, steps)
        for n, T in shapes:
            for d in ds:
                P = A.random_problem(n, T, d, trials=count, generator=A.set_seed(d)).to(dev)
                att = A.WAttention.zeros(d, count, device=dev)
                A.train(att, P, k, 0.1, "ngd", log_every=max(k, 1))
                A.maxmargin.run_outcomes(P, att.probabilities(P))

    def a6(dev, tiny):
        count, k = (4, 2) if tiny else (a6_runs, steps)
        X, Y, Z, V, W0 = (t.to(dev) for t in A.studies.a6_draw(count, 10, A.set_seed(2)))
        A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=k, lr=0.1, every=max(k // 20, 1))

    def a5(dev, tiny):
        count = 1 if tiny else svm_count
        n, T, d = (3, 3, 3) if tiny else svm_shape
        P = A.random_problem(n, T, d, trials=count, generator=A.set_seed(4)).to(dev)
        A.maxmargin.svm_stack(P, P.opt, "fro")
        A.maxmargin.svm_stack(P, P.opt, "nuc")

    grid = f"{len(grid_shapes)} (n,T) x d in {grid_d}, {grid_runs} runs, {steps} NGD steps"
    return [("A3 training, W", f"n=6 T=8 d=10, {runs} runs, {steps} NGD steps", a3("W")),
            ("A3 training, (K,Q)", f"n=6 T=8 d=10, m=10, {runs} runs, {steps} NGD steps", a3("KQ")),
            ("A4 grid (+ run_outcomes)", grid, a4),
            ("A6 closed form ngd_relu_head", f"{a6_runs} runs, d=10, {steps} steps", a6),
            ("A5 Att-SVM solves (fro + nuc)", f"{svm_count} instances (n,T,d)={svm_shape}", a5)]


def timing(device: str, quick: bool) -> list[list[str]]:
    rows = []
    for name, size, run in studies(quick):
        seconds = {}
        for dev in dict.fromkeys(("cpu", device)):             # --device cpu: timed once
            try:
                run(dev, True)                               # warm-up, untimed
                _sync(dev)
                start = time.perf_counter()
                run(dev, False)
                _sync(dev)
                seconds[dev] = time.perf_counter() - start
            except Exception as error:                        # noqa: BLE001
                seconds[dev] = f"ERROR: {type(error).__name__}: {str(error)[:50]}"
        cpu, dev_s = seconds["cpu"], seconds[device]
        numbers = isinstance(cpu, float) and isinstance(dev_s, float)
        rows.append([name, size, f"{cpu:.2f}" if isinstance(cpu, float) else cpu,
                     f"{dev_s:.2f}" if isinstance(dev_s, float) else dev_s,
                     f"{cpu / dev_s:.2f}" if numbers and dev_s > 0 else "-"])
    return rows


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="device compared with the CPU (default cuda; "
                        "cpu = self-test of this script)")
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--tol", type=float, default=1e-6, help="largest relative difference accepted")
    parser.add_argument("--no-timing", action="store_true", help="skip the timed studies")
    args = parser.parse_args(argv)
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu-check: no CUDA device visible to torch {torch.__version__} (CUDA build: "
              f"{torch.version.cuda or 'none'}); nothing checked. Self-test: "
              "python tools/gpu_check.py --device cpu --quick")
        return 0
    try:
        torch.empty(1, device=device)
    except (RuntimeError, ValueError) as error:
        print(f"gpu-check: device {device!r} is not usable here: {error}")
        return 2
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "CPU"
    print(f"gpu-check: {device} ({name}) against cpu; torch {torch.__version__}, attnsvm "
          f"{A.__version__}, float64, {torch.get_num_threads()} CPU threads, "
          f"{'quick' if args.quick else 'full'} sizes\n")
    warnings.simplefilter("ignore")                           # path warnings etc.: not the point
    start = time.perf_counter()
    rows, ok = compare(device, args.quick, args.tol)
    print(f"1. Same seed, CPU vs {device}: largest relative difference per function "
          f"(max|cpu - dev| / max|cpu| over its outputs; target <= {args.tol:g})\n")
    print(f"(1-ulp spread, for a function above the target: how far the CPU's own answer moves when "
          f"every drawn input moves by one ulp,\n largest of {SPREAD_RUNS} draws, shown for the output "
          f"that differs most; a function whose every output is within the target or\n within "
          f"{SPREAD_FACTOR:g}x its own spread is ill-conditioned, its difference amplified rounding; "
          f"the {SHORT}-step runs never pass that way)\n")
    print(table(["function", "rel. diff", "1-ulp spread", "status", f"seconds cpu / {device}"], rows))
    within = sum(r[3] == "ok" for r in rows)
    conditioned = sum(r[3] == "ok (ill-conditioned)" for r in rows)
    flagged = len(rows) - within - conditioned
    print(f"\n{within} of {len(rows)} functions within {args.tol:g}"
          + (f"; {conditioned} ill-conditioned, within {SPREAD_FACTOR:g}x their 1-ulp spread"
             if conditioned else "") + (f"; {flagged} flagged" if flagged else ""))
    if not args.no_timing:
        print(f"\n2. Heavy studies timed on cpu and {device} (seconds; ratio = cpu / {device}, "
              "> 1: the device is faster)\n")
        print(table(["study", "size", "cpu s", f"{device} s", "ratio"], timing(device, args.quick)))
    print(f"\ngpu-check: {'OK' if ok else 'FLAGGED'} in {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
