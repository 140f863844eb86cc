"""Benchmark: the book's heavy studies with one thread per kernel against the default thread count,
two at a time, as ``make test`` and ``make book`` run them on a 2-core machine.

Every chapter runs in its own kernel and two kernels run at once. With PyTorch's and BLAS's
default, each kernel starts one thread per core, so two kernels oversubscribe the cores; the Makefile
therefore sets ``OMP_NUM_THREADS=1``. This script measures that choice: each workload below is run in
two concurrent processes, once with ``OMP_NUM_THREADS=1`` and once with the variable unset, and the
wall times are printed side by side with their ratio. The workloads are the book's heavy cells,
shortened (about one minute with one thread; the default thread count can take several times
longer: measured on an idle 2-core machine, 8x on A3, 4x on A4, 1x on A5, 33x on A6):

- A3: normalized GD on W for 100 A3 runs (n=6, T=8, d=10), 1000 steps (chapters 3, 3b, 4);
- A4: normalized GD on 3 x 6 grid points of 100 runs (n=5, T=5), 1000 steps (chapter 5);
- A5: 100 nuclear-norm Att-SVM solves at (n, T, d) = (10, 5, 20) (chapter 3b);
- A6: the closed-form ReLU-head NGD for 1024 runs at d = 10, 2000 steps (chapter 6).

Usage:  python bench/bench_threads.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

WORKLOADS = {
    "A3 (W, NGD)": """
P = A.random_problem(6, 8, 10, trials=100, generator=A.set_seed(0))
A.train(A.WAttention.zeros(10, trials=100), P, {steps}, lr=0.1, method="ngd", log_every={steps})
""",
    "A4 (grid, NGD)": """
for d in (2, 3, 4, 5, 10, 20)[:{dims}]:
    P = A.random_problem(5, 5, d, trials=100, generator=A.set_seed(d))
    A.train(A.WAttention.zeros(d, trials=100), P, {steps}, lr=0.1, method="ngd", log_every={steps})
""",
    "A5 (nuclear SVMs)": """
P = A.random_problem(10, 5, 20, trials={solves}, generator=A.set_seed(1))
for b in range({solves}):
    try:
        A.att_svm(P.X[b], P.Z[b], P.opt[b], "nuc")
    except A.InfeasibleError:
        pass
""",
    "A6 (ReLU head, closed form)": """
X, Y, Z, V, W0 = A.studies.a6_draw({runs}, 10, A.set_seed(2))
A.studies.ngd_relu_head(X, Y, Z, V, W0, steps={steps6})
""",
}


def run_pair(code: str, threads: str | None) -> float:
    """Wall time of two concurrent processes running ``code``."""
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    program = "import attnsvm as A\n" + code
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", program], env=env) for _ in range(2)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"a workload failed (exit codes {codes})")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 10x shorter workloads")
    args = parser.parse_args()
    sizes = dict(steps=100, dims=2, solves=10, runs=256, steps6=200) if args.quick else \
        dict(steps=1000, dims=3, solves=100, runs=1024, steps6=2000)
    print(f"{os.cpu_count()} cores; each workload twice at once; import time included\n")
    print(f"{'workload':>28}  {'1 thread (s)':>12}  {'default (s)':>11}  {'default / 1 thread':>18}")
    for name, template in WORKLOADS.items():
        code = template.format(**sizes)
        one = run_pair(code, "1")
        default = run_pair(code, None)
        print(f"{name:>28}  {one:12.1f}  {default:11.1f}  {default / one:18.2f}", flush=True)


if __name__ == "__main__":
    main()
