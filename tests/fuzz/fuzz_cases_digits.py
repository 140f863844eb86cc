"""Fuzz cases for attnsvm.studies.digits.logistic_cv_accuracy (the baselines of chapter 10): bad features,
labels, indices, C grids, folds and iteration counts must be refused with ValueError/TypeError by
the library."""

from __future__ import annotations

import random
from typing import Callable

import numpy as np

import attnsvm as A
from fuzz_inputs import NON_FINITE, NON_NUMERIC, checked


def cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    n = 12
    gen = np.random.default_rng(rng.randrange(1000))
    X = gen.normal(size=(n, 3))
    y = np.array([1.0, -1.0] * (n // 2))
    tr, te = np.arange(8), np.arange(8, n)
    folds = [(np.arange(4), np.arange(4, 8)), (np.arange(4, 8), np.arange(4))]
    out: list[tuple[str, str, str, Callable]] = []

    def add(kind, what, thunk):
        out.append(("logistic_cv_accuracy", kind, what, thunk))

    for value in NON_FINITE:
        bad = X.copy()
        bad[rng.randrange(n), rng.randrange(3)] = value
        add("non-finite", f"features with {value}", lambda b=bad: A.studies.logistic_cv_accuracy(b, y, tr, te, [1.0], folds))
        add("non-finite", f"C = {value}", lambda v=value: A.studies.logistic_cv_accuracy(X, y, tr, te, [v], folds))
        bad_y = y.copy()
        bad_y[0] = value
        add("non-finite", f"labels with {value}", lambda b=bad_y: A.studies.logistic_cv_accuracy(X, b, tr, te, [1.0], folds))
    for value in NON_NUMERIC:
        add("non-numeric", f"features = {value!r}", lambda v=value: A.studies.logistic_cv_accuracy(v, y, tr, te, [1.0], folds))
        add("non-numeric", f"train = {value!r}", lambda v=value: A.studies.logistic_cv_accuracy(X, y, v, te, [1.0], folds))
        add("non-numeric", f"Cs = {value!r}", lambda v=value: A.studies.logistic_cv_accuracy(X, y, tr, te, v, folds))
        add("non-numeric", f"folds = {value!r}", lambda v=value: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], v))
        add("non-numeric", f"max_iter = {value!r}",
            lambda v=value: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], folds, max_iter=v))
    add("labels", "labels in {0, 1}", lambda: A.studies.logistic_cv_accuracy(X, (y > 0) * 1.0, tr, te, [1.0], folds))
    add("labels", "one label per example missing", lambda: A.studies.logistic_cv_accuracy(X, y[:-1], tr, te, [1.0], folds))
    add("labels", "a fit set with one label", lambda: A.studies.logistic_cv_accuracy(
        X, y, tr, te, [1.0], [(np.array([0, 2, 4]), np.array([1, 3]))]))
    add("shape", "features of one example", lambda: A.studies.logistic_cv_accuracy(X[:1], y[:1], [0], [0], [1.0], folds))
    add("shape", "features without a feature axis", lambda: A.studies.logistic_cv_accuracy(X[:, 0], y, tr, te, [1.0], folds))
    add("indices", "test index out of range", lambda: A.studies.logistic_cv_accuracy(X, y, tr, [n], [1.0], folds))
    add("indices", "negative train index", lambda: A.studies.logistic_cv_accuracy(X, y, [-1, 0], te, [1.0], folds))
    add("indices", "float indices", lambda: A.studies.logistic_cv_accuracy(X, y, tr * 1.0, te, [1.0], folds))
    add("indices", "empty test set", lambda: A.studies.logistic_cv_accuracy(X, y, tr, np.array([], dtype=int), [1.0], folds))
    add("indices", "fold index beyond the training set",
        lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], [(np.arange(4), np.array([8]))]))
    add("folds", "no folds", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], []))
    add("folds", "a fold that is not a pair", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], [np.arange(4)]))
    add("folds", "an array of folds", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], np.zeros((2, 2, 4), int)))
    add("grid", "negative C", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0, -1.0], folds))
    add("grid", "empty C grid", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [], folds))
    add("grid", "C grid as a matrix", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [[1.0]], folds))
    add("argument", "max_iter = 0", lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], folds, max_iter=0))
    add("argument", "max_iter = 1 (does not converge)",
        lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1.0], folds, max_iter=1))
    add("extreme", "tiny C: a near-zero model, accuracy in [0, 1]",
        checked(lambda: A.studies.logistic_cv_accuracy(X, y, tr, te, [1e-8], folds),
                lambda r: 0.0 <= r[0] <= 1.0 and r[1] == 1e-8))
    return out
