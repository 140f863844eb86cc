"""Benchmark: training the A6 runs (paper A, nonlinear ReLU head) batched, against a per-run loop.

The A6 experiment (THEORY.md section 4; book chapter 6) trains many small models: cross-attention
with n=3 inputs of T=4 unit-norm tokens in dimension d in {4, 6, 8, 10}, unit queries, labels
+-1, the head h(r) = sum_j ReLU(V_j^T r) with V Gaussian / ||V||_F, W(0) with entries uniform on
[-1/sqrt(d), 1/sqrt(d)], logistic loss, 2000 normalized-GD steps W <- W - 0.1 g / (||g|| + eps),
eps = 2.2e-16, float64. Only a few percent of the runs pass the authors' acceptance filter, so 500
accepted runs per d need tens of thousands of trained ones. Three ways to train them are timed on
identical inputs:

(a) ``attnsvm.train(WAttention(W0), problem, head=MLPHead(V), eps=2.2e-16)``: batched over the
    runs, gradients by autograd (re-centred softmax).
(b) ``attnsvm.studies.ngd_relu_head``, the closed form (batched): W = W0 + sum_it beta_it x_it z_i^T, logits
    a = a0 + K beta with the Gram matrix K of the features x_it z_i^T, the gradient in closed
    form, ||grad||^2 = delta^T K delta; batch as the last (contiguous) dimension, in chunks.
(c) the loop of the authors' notebook style: one ``torch.nn.Module`` per run (``nn.Linear``
    W without bias, value layer holding V, ReLU, output weights 1), ``torch.optim.SGD``, a Python
    loop over runs and 2001 steps, each gradient divided by (||grad|| + eps), the iterate stored
    every 100 steps; textbook softmax.

All on one CPU thread (torch.set_num_threads(1)). The loop (c) is timed on a subset (default
20 runs x 2001 steps at d = 10) and compared run by run with (a) and (b); (a) and (b) are also
timed on a larger batch for their throughput. The script then extrapolates the full A6 study:
runs to train per d = 500 / (acceptance rate per trained run), with the rates measured in chapter
6 (``--rates``) and, for comparison, the authors' rates (12%, 13%, 4%, 1.2%).

Usage:  python bench/bench_a6.py            # 20 loop runs x 2001 steps, batches of 2000 / 8192
        python bench/bench_a6.py --quick    # 4 loop runs x 300 steps, small batches
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

import attnsvm as A

F64 = torch.float64
EPS = torch.finfo(F64).eps                    # 2.22e-16, the authors' eps
DS = (4, 6, 8, 10)
OUR_RATES = (0.229, 0.104, 0.049, 0.0216)    # accepted / trained runs measured in chapter 6 (paper scale)
AUTHORS_RATES = (0.12, 0.13, 0.04, 0.012)     # THEORY.md, pitfall 6


def draw_runs(count: int, d: int, g: torch.Generator):
    """The A6 draws without the runs that have no -1 label (the authors skip them)."""
    X, Y, Z, V, W0 = A.studies.a6_draw(count, d, g)
    keep = (Y < 0).any(-1)
    return X[keep], Y[keep], Z[keep], V[keep], W0[keep]


# --- (a) attnsvm.train ---------------------------------------------------------------------------

def with_attnsvm(X, Y, Z, V, W0, steps: int) -> torch.Tensor:
    problem = A.Problem(X, Y, Z, torch.ones(X.shape[-1], dtype=F64) / X.shape[-1] ** 0.5)
    att = A.WAttention(W0.clone())
    A.train(att, problem, steps, lr=0.1, method="ngd", head=A.MLPHead(V), log_every=100,
            record_iterates=True, eps=EPS)
    return att.combined()


# --- (b) closed form, batched ----------------------------------------------------------------------

def closed_form(X, Y, Z, V, W0, steps: int) -> torch.Tensor:
    """attnsvm.studies.ngd_relu_head: normalized GD in the coordinates W = W0 + sum_it beta_it x_it z_i^T,
    iterates kept every 100 steps; returns the final W."""
    beta = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=steps, lr=0.1, eps=EPS, every=100)
    return A.studies.span_iterates(beta[-1], X, Z, W0)


# --- (c) the per-run loop --------------------------------------------------------------------------

class ReluHeadAttention(nn.Module):
    """logits z^T W(X)^T (nn.Linear, so W_attnsvm = weight^T), output sum_j ReLU((X^T s) V)_j."""

    def __init__(self, d: int, V: torch.Tensor, W0: torch.Tensor):
        super().__init__()
        self.W = nn.Linear(d, d, bias=False, dtype=F64)
        self.value = nn.Linear(d, d, bias=False, dtype=F64)
        with torch.no_grad():
            self.W.weight.copy_(W0.T)                 # the same W(0) as (a) and (b)
            self.value.weight.copy_(V.T)              # value(x) = x V
        self.value.weight.requires_grad_(False)
        self.out = torch.ones(d, dtype=F64)

    def forward(self, X, Z):
        scores = torch.softmax(Z.unsqueeze(1) @ self.W(X).transpose(-2, -1), dim=-1)   # (n, 1, T)
        self.probabilities = scores.detach()
        return (torch.relu(scores @ self.value(X)) @ self.out).view(-1)


def per_run_loop(X, Y, Z, V, W0, steps: int, lr: float = 0.1, every: int = 100) -> torch.Tensor:
    finals = []
    for b in range(X.shape[0]):
        model = ReluHeadAttention(X.shape[-1], V[b], W0[b])
        optimizer = torch.optim.SGD([model.W.weight], lr=lr)
        iterates = []
        for it in range(steps + 1):
            optimizer.zero_grad()
            out = model(X[b], Z[b])
            loss = torch.log(1 + torch.exp(-Y[b] * out)).mean()
            if it == steps:
                break
            loss.backward()
            model.W.weight.grad /= model.W.weight.grad.norm() + EPS
            optimizer.step()
            if it % every == 0:
                iterates.append(model.W.weight.detach().T.clone().numpy())
        finals.append(model.W.weight.detach().T.clone())
    return torch.stack(finals)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop-runs", type=int, default=20, help="runs of the per-run loop (d = 10)")
    parser.add_argument("--steps", type=int, default=2000, help="NGD steps (the loop runs steps + 1 forward passes)")
    parser.add_argument("--batch", type=int, default=8192, help="batch for the closed-form throughput")
    parser.add_argument("--attnsvm-batch", type=int, default=2000, help="batch for attnsvm.train's throughput")
    parser.add_argument("--attnsvm-steps", type=int, default=100, help="steps for attnsvm.train's throughput")
    parser.add_argument("--rates", type=float, nargs=4, default=OUR_RATES,
                        help="acceptance per trained run at d = 4 6 8 10 (chapter 6)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="4 loop runs x 300 steps, small batches")
    args = parser.parse_args()
    if args.quick:
        args.loop_runs, args.steps, args.batch, args.attnsvm_batch, args.attnsvm_steps = 4, 300, 2048, 500, 50

    torch.set_num_threads(1)
    g = A.set_seed(args.seed)
    d = 10
    print(f"A6 setting: n=3, T=4, d={d}, ReLU head, {args.steps} NGD steps, lr 0.1, eps 2.2e-16, "
          f"float64, torch {torch.__version__}, torch.set_num_threads(1)\n")

    # the same runs, three ways
    X, Y, Z, V, W0 = draw_runs(int(args.loop_runs * 1.4) + 4, d, g)
    X, Y, Z, V, W0 = X[:args.loop_runs], Y[:args.loop_runs], Z[:args.loop_runs], V[:args.loop_runs], W0[:args.loop_runs]
    closed_form(X[:2], Y[:2], Z[:2], V[:2], W0[:2], 5)            # warm-ups
    with_attnsvm(X[:2], Y[:2], Z[:2], V[:2], W0[:2], 5)
    per_run_loop(X[:1], Y[:1], Z[:1], V[:1], W0[:1], 5)
    W_loop, t_loop = timed(per_run_loop, X, Y, Z, V, W0, args.steps)
    W_train, t_train = timed(with_attnsvm, X, Y, Z, V, W0, args.steps)
    W_closed, t_closed = timed(closed_form, X, Y, Z, V, W0, args.steps)
    runs = X.shape[0]
    print(f"{runs} runs x {args.steps} steps:  (c) per-run loop {t_loop:.2f} s   "
          f"(a) attnsvm.train {t_train:.2f} s   (b) closed form {t_closed:.2f} s")
    print(f"  ratio loop / attnsvm.train {t_loop / t_train:.1f}x, loop / closed form {t_loop / t_closed:.1f}x")
    for name, W in (("attnsvm.train", W_train), ("closed form", W_closed)):
        c = A.corr(W, W_loop, 1)
        print(f"  1 - corr(final W, loop's): {name:13s} max {1 - float(c.min()):.1e}, "
              f"median {1 - float(c.median()):.1e}")

    # throughput on large batches
    Xb, Yb, Zb, Vb, W0b = draw_runs(int(args.batch * 1.15) + 10, d, g)
    Xb, Yb, Zb, Vb, W0b = Xb[:args.batch], Yb[:args.batch], Zb[:args.batch], Vb[:args.batch], W0b[:args.batch]
    _, t_big = timed(closed_form, Xb, Yb, Zb, Vb, W0b, args.steps)
    nb = args.attnsvm_batch
    _, t_big_train = timed(with_attnsvm, Xb[:nb], Yb[:nb], Zb[:nb], Vb[:nb], W0b[:nb], args.attnsvm_steps)
    per = {"(c) per-run loop": t_loop / (runs * args.steps),
           "(a) attnsvm.train": t_big_train / (nb * args.attnsvm_steps),
           "(b) closed form": t_big / (Xb.shape[0] * args.steps)}
    print(f"\nthroughput (microseconds per run and step): loop {1e6 * per['(c) per-run loop']:.2f} "
          f"({runs} runs), attnsvm.train {1e6 * per['(a) attnsvm.train']:.2f} ({nb} runs x "
          f"{args.attnsvm_steps} steps), closed form {1e6 * per['(b) closed form']:.3f} ({Xb.shape[0]} runs)")

    print("\nextrapolated full A6 study (500 accepted runs per d, 2000 steps; d = 10 costs used for "
          "every d, an upper bound for the smaller d):")
    for label, rates in (("chapter 6 rates", args.rates), ("authors' rates", AUTHORS_RATES)):
        trained = sum(500 / r for r in rates)
        line = ", ".join(f"{k} {v * trained * 2000:.0f} s" for k, v in per.items())
        print(f"  {label} {' / '.join(f'{100 * r:.1f}%' for r in rates)}: {trained:.0f} trained runs -> {line}"
              f"  [{per['(c) per-run loop'] * trained * 2000 / 3600:.1f} h for the loop]")
    print("\nLoad average at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
          + f" on {os.cpu_count()} CPUs (timings on a shared machine are upper bounds).")


if __name__ == "__main__":
    main()
