"""Paper A's rank study (A5; chapter 3b): the rank of Att-SVM and Att-SVM* on random instances.

For each setting ``(n, T, d)`` the study draws 100 instances with ``random_problem`` (seeded by the
setting alone, so every setting is reproducible on its own and in any order), takes the selection
``alpha = opt``, and records per instance: whether Att-SVM is feasible, the ranks of the Frobenius
solution ``W^mm`` (exact, :func:`~attnsvm.att_svm`) and of the nuclear solution ``W^mm_*``
(all feasible instances of a setting in one batched interior-point run, each answer certified or,
without a certificate, Clarabel's: :func:`~attnsvm.att_svms`), the ratio of the last kept to the
first dropped singular value of ``W^mm_*`` (the dropped ones are solver residue: the ratio depends
on the solver, the rank does not), the norm and support of ``W^mm``, and the rank that the authors' method reports
(:func:`~attnsvm.first_order_nuclear_svm`: SCS at its defaults, singular values above ``1e-7``
counted; an infeasible instance, or one where SCS returns nothing, counts as rank 1 there, as in their
figure). Paper A, Section 4 (Figure of the ranks) and the reproduction report (A5).

The settings are independent, so :func:`a5_rank_study` can spread them over several processes
(``workers``): each setting is solved from scratch (no warm start), so the answers do not depend
on the number of workers or on the order of the settings.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import torch

from ..model.data import Problem, random_problem
from ..maxmargin.nuclear import first_order_nuclear_svm
from ..maxmargin.svm import att_svm, att_svms
from ..maxmargin._svm_core import InfeasibleError

A5_SETTINGS = ((5, 5), (10, 5), (15, 5), (5, 10), (5, 15))    # (n, T) of paper A's rank figure
A5_D = (1, 2, 3, 4, 5, 10, 15, 20)                               # the dimensions d of its x-axis
A5_INSTANCES = 100                                               # instances per setting in the paper
AUTHORS_RANK_TOL = 1e-7      # the authors count singular values above this absolute threshold


@dataclass(frozen=True)
class RankRow:
    """One instance of the rank study. ``authors`` is the rank the authors' method reports (1 for an
    infeasible instance or when SCS returns no solution, as their figure counts it); the other
    fields are None on an infeasible instance. ``gap`` is ``sigma_r / sigma_{r+1}`` of ``W^mm_*``
    at its numerical rank ``r`` (inf when ``r = d``); ``n_support`` counts the examples with a
    support token of ``W^mm``."""

    feasible: bool
    authors: int
    fro: int | None = None
    nuc: int | None = None
    gap: float | None = None
    fro_norm: float | None = None
    n_support: int | None = None
    scs_failed: bool = False


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def a5_instances(n: int, T: int, d: int) -> Problem:
    """The 100 instances of setting ``(n, T, d)``: ``random_problem`` seeded with
    ``10_000 n + 100 T + d`` (one seed per setting, whatever else is drawn)."""
    n, T, d = (_positive_int(v, name) for v, name in ((n, "n"), (T, "T"), (d, "d")))
    if T < 2:
        raise ValueError(f"T must be at least 2 (a selection needs tokens to beat), got {T}")
    return random_problem(n, T, d, trials=A5_INSTANCES,
                          generator=torch.Generator().manual_seed(10_000 * n + 100 * T + d))


def rank_rows(n: int, T: int, d: int, count: int = A5_INSTANCES) -> list[RankRow]:
    """The rank study on the first ``count`` instances of setting ``(n, T, d)`` (see the module)."""
    count = _positive_int(count, "count")
    if count > A5_INSTANCES:
        raise ValueError(f"count must be at most {A5_INSTANCES} (the instances per setting), got {count}")
    problem = a5_instances(n, T, d).select(slice(count))
    feasible = []
    for b in range(count):
        instance = problem.trial(b)
        try:
            feasible.append((b, att_svm(instance.X, instance.Z, instance.opt, "fro")))
        except InfeasibleError:
            pass
    # every feasible instance's Att-SVM*, solved together (one batched, certified interior-point run)
    chosen = torch.tensor([b for b, _ in feasible], dtype=torch.long)
    nuclear = att_svms(problem.select(chosen), problem.opt[chosen], "nuc") if feasible else []
    rows = [RankRow(feasible=False, authors=1) for _ in range(count)]
    for (b, fro), nuc in zip(feasible, nuclear):
        instance = problem.trial(b)
        first_order = first_order_nuclear_svm(instance.X, instance.Z, instance.opt).W
        authors = 1 if first_order is None else int(
            (torch.linalg.svdvals(first_order) > AUTHORS_RANK_TOL).sum())
        sigma = torch.linalg.svdvals(nuc.W)
        gap = float(sigma[nuc.rank - 1] / sigma[nuc.rank]) if nuc.rank < d else float("inf")
        rows[b] = RankRow(feasible=True, authors=authors, fro=fro.rank, nuc=nuc.rank, gap=gap,
                          fro_norm=float(fro.W.norm()), n_support=int(fro.support.any(dim=1).sum()),
                          scs_failed=first_order is None)
    return rows


def _rank_rows_task(setting: tuple[int, int, int, int]) -> list[RankRow]:
    return rank_rows(*setting)


def a5_rank_study(settings=A5_SETTINGS, dims=A5_D, count: int = A5_INSTANCES,
                  workers: int | str = 1) -> dict[tuple[int, int, int], list[RankRow]]:
    """:func:`rank_rows` for every ``(n, T)`` in ``settings`` and ``d`` in ``dims``, keyed
    ``(n, T, d)`` in that order.

    ``workers``: processes that solve settings at the same time (``"auto"``: the CPUs this process
    may use, at most one per setting). Each worker is a fresh interpreter; the answers are the same
    for any number of workers (every solve is cold and every setting seeded on its own).
    """
    count = _positive_int(count, "count")
    try:
        keys = [(_positive_int(n, "n"), _positive_int(T, "T"), _positive_int(d, "d"))
                for n, T in settings for d in dims]
    except (TypeError, ValueError) as error:
        raise ValueError(f"settings must be (n, T) pairs and dims positive integers: {error}") from None
    if not keys:
        raise ValueError("no setting to study: give at least one (n, T) and one d")
    if workers == "auto":
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(_positive_int(workers, "workers"), len(keys))
    tasks = [key + (count,) for key in keys]
    if workers == 1:
        return {key: _rank_rows_task(task) for key, task in zip(keys, tasks)}
    # the largest settings first, so that the last one to start is a small one
    order = sorted(range(len(tasks)), key=lambda i: -keys[i][0] * keys[i][1] * keys[i][2] ** 2)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        done = dict(zip(order, pool.map(_rank_rows_task, [tasks[i] for i in order])))
    return {key: done[i] for i, key in enumerate(keys)}
