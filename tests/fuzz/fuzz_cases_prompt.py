"""Fuzz cases for attnsvm.studies.prompt and attnsvm.studies.prompt_joint (paper B's instances, prompt
probabilities, curve diagnostics, the B4 offset and the joint (v, p) runs): bad sizes, shapes,
settings, types and non-finite data."""

from __future__ import annotations

import random
from typing import Callable

import torch
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked

import attnsvm as A

# constants (no input of their own); logistic_offset_turns takes no argument (checked below)
EXEMPT = {"B_KEY_MATRIX", "OFFSET_LOSSES"}


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    entry = "prompt attention"
    found = []
    F64 = torch.float64
    P1, P3 = A.studies.b1_problem(0.0), A.studies.b3_problem([0.5, 1.5])
    KEY = A.studies.B_KEY_MATRIX
    curve = torch.linspace(0, 1, 11, dtype=F64)

    def add(kind, what, thunk):
        found.append((entry, kind, what, thunk))

    add("valid", "logistic_offset_turns", checked(A.studies.logistic_offset_turns,
                                                  lambda r: 1.278 < r[0] < 1.279 and 1.596 < r[1] < 1.598))
    add("extreme", "b4_offset C=1e6 (no overflow)",
        checked(lambda: A.studies.b4_offset(1e6), lambda r: abs(r + (1e6 - 13.8155 - 1.3133) / 2) < 1e-3))
    for bad in NON_FINITE:
        add("non-finite", f"b1_problem third_score={bad}", lambda b=bad: A.studies.b1_problem(b))
        add("non-finite", f"b4_problem scores with {bad}", lambda b=bad: A.studies.b4_problem([1.0, b]))
        add("non-finite", f"b3_problem third with {bad}", lambda b=bad: A.studies.b3_problem([0.5, b]))
        add("non-finite", f"b4_offset C={bad}", lambda b=bad: A.studies.b4_offset(b))
        add("non-finite", f"first_crossing threshold={bad}", lambda b=bad: A.studies.first_crossing(curve, b))
        add("non-finite", f"first_departure curve with {bad}",
            lambda b=bad: A.studies.first_departure(torch.full_like(curve, b), curve))
        add("non-finite", f"selected_probability prompts with {bad}",
            lambda b=bad: A.studies.selected_probability(torch.full((4, 3), b), P1, 1, KEY))
        add("non-finite", f"mixed_label_margin features with {bad}",
            lambda b=bad: A.studies.mixed_label_margin(torch.full((3, 2), b), P3.Y))
        add("non-finite", f"joint_ngd p0 with {bad}", lambda b=bad: A.studies.joint_ngd(P3, [b, 0.0], [1.0, 0.0], 2))
        add("non-finite", f"authors_joint_ngd v0 with {bad}",
            lambda b=bad: A.studies.authors_joint_ngd(P3, [0.0, 1.0], [b, 0.0], 2))
        add("non-finite", f"label_probability heads with {bad}",
            lambda b=bad: A.studies.label_probability(torch.zeros(3, 2), torch.full((3, 2), b), P3))
        add("non-finite", f"log_growth_rate norms with {bad}",
            lambda b=bad: A.studies.log_growth_rate(torch.full((20,), b), 2, 10))
        add("non-finite", f"selected_term_error iterates with {bad}",
            lambda b=bad: A.studies.selected_term_error(torch.full((5, 3), b), P1, [1], KEY))
        add("non-finite", f"selected_term_error heads with {bad}",
            lambda b=bad: A.studies.selected_term_error(torch.zeros(5, 2), P3, [1, 1, 1], heads=torch.full((5, 2), b)))
        add("non-finite", f"saturation_onset iterates with {bad}",
            lambda b=bad: A.studies.saturation_onset(torch.full((5, 3), b), P1, [1], KEY))
    for bad in NON_NUMERIC + [True]:
        add("type", f"b1_problem third_score={bad!r}", lambda b=bad: A.studies.b1_problem(b))
        add("type", f"b4_offset C={bad!r}", lambda b=bad: A.studies.b4_offset(b))
        add("type", f"first_crossing threshold={bad!r}", lambda b=bad: A.studies.first_crossing(curve, b))
        add("type", f"selected_probability problem={bad!r}", lambda b=bad: A.studies.selected_probability(torch.zeros(3), b, 1))
        add("type", f"joint_ngd problem={bad!r}", lambda b=bad: A.studies.joint_ngd(b, [0.0, 1.0], [1.0, 0.0], 2))
        add("type", f"authors_joint_ngd problem={bad!r}",
            lambda b=bad: A.studies.authors_joint_ngd(b, [0.0, 1.0], [1.0, 0.0], 2))
        add("type", f"label_probability problem={bad!r}",
            lambda b=bad: A.studies.label_probability(torch.zeros(3, 2), torch.zeros(3, 2), b))
        add("type", f"b2_problem seed={bad!r}", lambda b=bad: A.studies.b2_problem(b))
    for bad in NON_NUMERIC:
        add("type", f"b3_problem third={bad!r}", lambda b=bad: A.studies.b3_problem(b))
        add("type", f"b4_problem scores={bad!r}", lambda b=bad: A.studies.b4_problem(b))
        add("type", f"mixed_label_margin features={bad!r}", lambda b=bad: A.studies.mixed_label_margin(b, P3.Y))
        add("type", f"first_departure reference={bad!r}", lambda b=bad: A.studies.first_departure(curve, b))
        add("type", f"saturation_onset iterates={bad!r}", lambda b=bad: A.studies.saturation_onset(b, P1, [1], KEY))
        add("type", f"log_growth_rate norms={bad!r}", lambda b=bad: A.studies.log_growth_rate(b, 1, 2))
    for bad in ["float64", torch.int64, 3]:
        add("dtype", f"b1_problem dtype={bad!r}", lambda b=bad: A.studies.b1_problem(0.0, dtype=b))
        add("dtype", f"b3_problem dtype={bad!r}", lambda b=bad: A.studies.b3_problem([0.5, 1.0], dtype=b))
        add("dtype", f"b4_problem dtype={bad!r}", lambda b=bad: A.studies.b4_problem([1.0], dtype=b))
    # sizes and settings
    for key, values in (("n", [0, -1, 2.5]), ("T", [1, 0, "7"]), ("sigma", [-0.1, float("nan")])):
        for bad in values:
            add("setting", f"b2_problem {key}={bad!r}", lambda k=key, b=bad: A.studies.b2_problem(0, **{k: b}))
    add("setting", "b2_problem seed=-1", lambda: A.studies.b2_problem(-1))
    add("shape", "b4_problem scores empty", lambda: A.studies.b4_problem([]))
    add("shape", "b4_problem scores a matrix", lambda: A.studies.b4_problem([[1.0, 2.0]]))
    add("setting", "b4_offset C=0", lambda: A.studies.b4_offset(0.0))
    add("setting", "b4_offset C=-2", lambda: A.studies.b4_offset(-2.0))
    add("setting", "b4_offset loss='hinge'", lambda: A.studies.b4_offset(2.0, "hinge"))
    add("shape", "b3_problem third of 3 coordinates", lambda: A.studies.b3_problem([0.5, 1.0, 2.0]))
    add("shape", "selected_probability batched problem", lambda: A.studies.selected_probability(torch.zeros(3), A.studies.b4_problem([1.0, 2.0]), 1, KEY))
    add("shape", "selected_probability prompts of another dimension", lambda: A.studies.selected_probability(torch.zeros(2), P1, 1))
    add("shape", "selected_probability key matrix of another shape", lambda: A.studies.selected_probability(torch.zeros(3), P1, 1, torch.eye(2)))
    add("shape", "selected_probability prompts a scalar", lambda: A.studies.selected_probability(torch.tensor(1.0), P1, 1, KEY))
    add("shape", "selected_probability alpha out of range", lambda: A.studies.selected_probability(torch.zeros(3), P1, 5, KEY))
    add("type", "selected_probability alpha float", lambda: A.studies.selected_probability(torch.zeros(3), P1, 1.5, KEY))
    add("shape", "first_crossing empty curve", lambda: A.studies.first_crossing(torch.zeros(0), 0.5))
    add("shape", "first_crossing 2-D values", lambda: A.studies.first_crossing(torch.zeros(3, 3), 0.5))
    add("shape", "first_departure lengths differ", lambda: A.studies.first_departure(curve, curve[:5]))
    for bad in [0.0, -1e-3, float("nan")]:
        add("setting", f"first_departure tol={bad!r}", lambda b=bad: A.studies.first_departure(curve, curve, tol=b))
    add("valid", "selected_term_error B1 at p1 = 17 in float32 (term lost)",
        checked(lambda: A.studies.selected_term_error(torch.tensor([[17.0, 0.0, 0.0]]), P1.to(dtype=torch.float32), [1], KEY),
                lambda r: float(r) == 1.0))
    add("shape", "selected_term_error iterates (steps,)", lambda: A.studies.selected_term_error(torch.zeros(5), P1, [1], KEY))
    add("shape", "selected_term_error heads of another length",
        lambda: A.studies.selected_term_error(torch.zeros(5, 2), P3, [1, 1, 1], heads=torch.zeros(4, 2)))
    add("shape", "selected_term_error heads of another dimension",
        lambda: A.studies.selected_term_error(torch.zeros(5, 2), P3, [1, 1, 1], heads=torch.zeros(5, 3)))
    add("shape", "selected_term_error alpha out of range", lambda: A.studies.selected_term_error(torch.zeros(2, 3), P1, 4, KEY))
    add("shape", "selected_term_error batched problem",
        lambda: A.studies.selected_term_error(torch.zeros(2, 3), A.studies.b4_problem([1.0, 2.0]), 1, KEY))
    for bad in NON_NUMERIC:
        add("type", f"selected_term_error problem={bad!r}", lambda b=bad: A.studies.selected_term_error(torch.zeros(2, 3), b, 1, KEY))
    add("shape", "saturation_onset iterates (steps,)", lambda: A.studies.saturation_onset(torch.zeros(5), P1, [1], KEY))
    for k0, k1 in ((0, 5), (5, 5), (6, 5), (2, 20), (1.5, 5), (True, 5)):
        add("setting", f"log_growth_rate k0={k0!r} k1={k1!r}", lambda a=k0, b=k1: A.studies.log_growth_rate(curve, a, b))
    for what, p0, v0 in (("p0 of 3", [0.0, 1.0, 2.0], [1.0, 0.0]), ("v0 a matrix", [0.0, 1.0], [[1.0, 0.0]])):
        add("shape", f"joint_ngd {what}", lambda a=p0, b=v0: A.studies.joint_ngd(P3, a, b, 2))
        add("shape", f"authors_joint_ngd {what}", lambda a=p0, b=v0: A.studies.authors_joint_ngd(P3, a, b, 2))
    for bad in [0, -1, 2.5]:
        add("setting", f"joint_ngd steps={bad!r}", lambda b=bad: A.studies.joint_ngd(P3, [0.0, 1.0], [1.0, 0.0], b))
        add("setting", f"authors_joint_ngd steps={bad!r}", lambda b=bad: A.studies.authors_joint_ngd(P3, [0.0, 1.0], [1.0, 0.0], b))
    for key, bad in (("lr", 0.0), ("lr", -0.1), ("eps_p", -1.0), ("eps_v", float("inf"))):
        add("setting", f"authors_joint_ngd {key}={bad!r}",
            lambda k=key, b=bad: A.studies.authors_joint_ngd(P3, [0.0, 1.0], [1.0, 0.0], 2, **{k: b}))
    add("setting", "joint_ngd head given", lambda: A.studies.joint_ngd(P3, [0.0, 1.0], [1.0, 0.0], 2, head=A.LinearHead()))
    add("setting", "joint_ngd lr=0", lambda: A.studies.joint_ngd(P3, [0.0, 1.0], [1.0, 0.0], 2, lr=0.0))
    add("shape", "joint_ngd batched problem", lambda: A.studies.joint_ngd(A.studies.b4_problem([1.0, 2.0]), [0, 1, 0], [1, 0, 0], 2))
    add("shape", "label_probability shapes differ", lambda: A.studies.label_probability(torch.zeros(3, 2), torch.zeros(4, 2), P3))
    add("shape", "label_probability d wrong", lambda: A.studies.label_probability(torch.zeros(3, 3), torch.zeros(3, 3), P3))
    add("shape", "mixed_label_margin features (n,)", lambda: A.studies.mixed_label_margin(torch.ones(3), P3.Y))
    add("labels", "mixed_label_margin labels 0/1", lambda: A.studies.mixed_label_margin(torch.ones(3, 2), torch.tensor([0.0, 1.0, 1.0])))
    add("shape", "mixed_label_margin labels of another n", lambda: A.studies.mixed_label_margin(torch.ones(3, 2), torch.ones(2)))
    add("hopeless", "authors_joint_ngd overflowing", lambda: A.studies.authors_joint_ngd(A.studies.b3_problem([0.5, 1e300]), [0.0, 1.0], [1.0, 0.0], 3, lr=1e300))
    return found
