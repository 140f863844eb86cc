"""Benchmark: ``attnsvm.att_svm`` against a per-constraint cvxpy model of the same Att-SVM.

Identical random instances in the style of paper A's rank experiment (A5): unit-norm Gaussian tokens
and queries (``attnsvm.random_problem``), T=5, d=20, n in {5, 10, 15}, the selection alpha = opt,
both norms (Frobenius: Att-SVM; nuclear: Att-SVM*). Three solvers per instance:

(a) ``attnsvm.att_svm`` (set-up + solve): constraints as one matrix, solved in the subspace the data
    span by Clarabel, with a cached compiled problem per size and an NNLS feasibility screen;
(b) the per-constraint formulation of a typical research script: a d x d cvxpy Variable, one
    constraint object per (i, t), ``cp.norm(W, "fro" | "nuc")``, solved by Clarabel, so that the
    comparison isolates the set-up;
(c) the same model with SCS, the default solver when the authors' code was written (their
    configuration); a first-order method, accurate to ~1e-4.

It prints the time per solve, the ratios, and the agreement of the solutions (relative error in W,
and in the objective). With ``--a5`` it also times the full A5 sweep with ``attnsvm.att_svm``
(n in {5, 10, 15} with T=5 and T in {10, 15} with n=5; d in {1, 2, 3, 4, 5, 10, 15, 20}; 100 instances
each; both norms; infeasible instances counted), and prints the mean ranks.

Usage:  python bench/bench_svm.py                  # default comparison, well under 2 minutes
        python bench/bench_svm.py --instances 5    # quicker
        python bench/bench_svm.py --a5             # plus the full A5 sweep
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import cvxpy as cp
import numpy as np
import scipy.optimize
import torch

import attnsvm as A


def per_constraint(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray, norm: str, solver: str):
    """The research-script model: one cvxpy constraint per (i, t)."""
    n, T, d = X.shape
    W = cp.Variable((d, d))
    constraints = []
    for i in range(n):
        for t in range(T):
            if t != alpha[i]:
                constraints.append((X[i, alpha[i]] - X[i, t]) @ W @ Z[i] >= 1)
    problem = cp.Problem(cp.Minimize(cp.norm(W, norm)), constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem.solve(solver=solver)
    return W.value, problem.value


def exact_frobenius(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Exact Frobenius solution by least-distance programming (NNLS, Lawson and Hanson ch. 23)
    on the full d*d outer-product features: the reference for the Frobenius rows."""
    n, T, d = X.shape
    G = np.array([np.outer(X[i, alpha[i]] - X[i, t], Z[i]).ravel()
                  for i in range(n) for t in range(T) if t != alpha[i]])
    E = np.vstack([G.T, np.ones((1, G.shape[0]))])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f, maxiter=100 * E.shape[1])
    r = E @ u - f
    return (-r[:-1] / r[-1]).reshape(d, d)


def compare(sizes, instances: int, d: int, T: int, seed: int, with_scs: bool) -> None:
    print(f"Per-solve time (ms), {instances} instances per row, T={T}, d={d}, alpha = opt\n")
    print(f"{'norm':5} {'n':>3} | {'(a) attnsvm':>11} {'(b) loop+Clarabel':>17} {'(c) loop+SCS':>12} | "
          f"{'b/a':>6} {'c/a':>6} | {'W ref':>5} {'relerr W (a)':>12} {'relerr W (b)':>12} "
          f"{'relerr W (c)':>12} | {'relerr obj (a,b)':>16}")
    totals = {"a": 0.0, "b": 0.0, "c": 0.0}
    for norm in ("fro", "nuc"):
        for n in sizes:
            problems = A.random_problem(n, T, d, trials=instances, generator=A.set_seed(seed + n))
            times = {"a": 0.0, "b": 0.0, "c": 0.0}
            err_a, err_b, err_obj, err_c = [], [], [], []
            for b in range(instances):
                p = problems.trial(b)
                X, Z, alpha = p.X.numpy(), p.Z.numpy(), p.opt.numpy()
                start = time.perf_counter()
                ours = A.att_svm(p.X, p.Z, p.opt, norm=norm)
                times["a"] += time.perf_counter() - start
                start = time.perf_counter()
                W_b, obj_b = per_constraint(X, Z, alpha, norm, cp.CLARABEL)
                times["b"] += time.perf_counter() - start
                ref = exact_frobenius(X, Z, alpha) if norm == "fro" else W_b
                err_a.append(np.linalg.norm(ours.W.numpy() - ref) / np.linalg.norm(ref))
                err_b.append(np.linalg.norm(W_b - ref) / np.linalg.norm(ref))
                err_obj.append(abs(ours.objective - obj_b) / obj_b)
                if with_scs:
                    start = time.perf_counter()
                    W_c, _ = per_constraint(X, Z, alpha, norm, cp.SCS)
                    times["c"] += time.perf_counter() - start
                    err_c.append(np.linalg.norm(W_c - ref) / np.linalg.norm(ref))
            for k in totals:
                totals[k] += times[k]
            ms = {k: 1e3 * v / instances for k, v in times.items()}
            scs = (f"{ms['c']:12.1f}", f"{ms['c'] / ms['a']:6.1f}", f"{max(err_c):12.1e}") \
                if with_scs else (f"{'-':>12}", f"{'-':>6}", f"{'-':>12}")
            b_err = f"{max(err_b):12.1e}" if norm == "fro" else f"{'(ref)':>12}"
            print(f"{norm:5} {n:3d} | {ms['a']:11.1f} {ms['b']:17.1f} {scs[0]} | "
                  f"{ms['b'] / ms['a']:6.1f} {scs[1]} | {'exact' if norm == 'fro' else '(b)':>5} "
                  f"{max(err_a):12.1e} {b_err} {scs[2]} | {max(err_obj):16.1e}")
    ratio_c = f", (c)/(a) = {totals['c'] / totals['a']:.1f}x" if with_scs else ""
    print(f"\nTotal: (a) {totals['a']:.2f} s, (b) {totals['b']:.2f} s, (c) {totals['c']:.2f} s; "
          f"(b)/(a) = {totals['b'] / totals['a']:.1f}x{ratio_c}")
    print("relerr: max over instances. W reference: the exact least-distance (NNLS) solution for the "
          "Frobenius norm,\nthe Clarabel per-constraint solution (b) for the nuclear norm; objective: "
          "(a) against (b).")


def a5_sweep(instances: int, seed: int) -> None:
    configs = [(5, 5), (10, 5), (15, 5), (5, 10), (5, 15)]
    dims = [1, 2, 3, 4, 5, 10, 15, 20]
    print(f"\nA5 sweep with attnsvm.att_svm: {len(configs)} (n, T) x {len(dims)} d x {instances} "
          "instances x 2 norms, alpha = opt")
    print(f"{'n':>3} {'T':>3} {'d':>3} | {'infeasible':>10} | {'rank fro':>8} {'min(n,d)':>8} "
          f"{'rank nuc':>8} | {'fro (s)':>7} {'nuc (s)':>7}")
    totals = {"fro": 0.0, "nuc": 0.0}
    start_all = time.perf_counter()
    for n, T in configs:
        for d in dims:
            problems = A.random_problem(n, T, d, trials=instances, generator=A.set_seed(seed))
            infeasible, ranks, seconds = 0, {"fro": [], "nuc": []}, {"fro": 0.0, "nuc": 0.0}
            for b in range(instances):
                p = problems.trial(b)
                for norm in ("fro", "nuc"):
                    start = time.perf_counter()
                    try:
                        ranks[norm].append(A.att_svm(p.X, p.Z, p.opt, norm=norm).rank)
                    except A.InfeasibleError:
                        infeasible += norm == "fro"
                    seconds[norm] += time.perf_counter() - start
            for k in totals:
                totals[k] += seconds[k]
            mean = {k: (f"{np.mean(v):8.2f}" if v else f"{'-':>8}") for k, v in ranks.items()}
            print(f"{n:3d} {T:3d} {d:3d} | {infeasible:10d} | {mean['fro']} {min(n, d):8d} "
                  f"{mean['nuc']} | {seconds['fro']:7.2f} {seconds['nuc']:7.2f}")
    print(f"A5 sweep total: {time.perf_counter() - start_all:.1f} s "
          f"({len(configs) * len(dims) * instances} instances; Frobenius {totals['fro']:.1f} s, "
          f"nuclear {totals['nuc']:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=20, help="instances per n (comparison)")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--T", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scs", action="store_true", help="skip the SCS column")
    parser.add_argument("--a5", action="store_true", help="also time the full A5 sweep")
    parser.add_argument("--a5-instances", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"cvxpy {cp.__version__}, one thread (torch.set_num_threads(1)); "
          "set OMP_NUM_THREADS=1 for comparable numbers\n")
    start = time.perf_counter()
    compare([5, 10, 15], args.instances, args.d, args.T, args.seed, not args.no_scs)
    print(f"comparison wall time {time.perf_counter() - start:.1f} s")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.a5:
        a5_sweep(args.a5_instances, args.seed)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
