"""nuclear_dual (verified dual of Att-SVM*) and first_order_nuclear_svm (the authors' SCS method)."""

import numpy as np
import pytest
import torch

import attnsvm as A
from attnsvm.maxmargin import nuclear


@pytest.fixture
def P():
    return A.random_problem(3, 4, 5, generator=A.set_seed(2))


def test_dual_equals_the_primal_and_certifies_it(P):
    primal = A.att_svm(P.X, P.Z, P.opt, "nuc")
    dual = A.maxmargin.nuclear_dual(P.X, P.Z, P.opt)
    assert dual.value == pytest.approx(primal.objective, rel=1e-7)           # strong duality
    assert float(torch.linalg.matrix_norm(dual.certificate, 2)) <= 1 + 1e-6    # dual feasible
    assert float((dual.certificate * primal.W).sum()) == pytest.approx(primal.objective, rel=1e-6)
    assert bool((dual.multipliers >= 0).all()) and dual.multipliers.shape == (3 * 3,)


def test_dual_is_scale_invariant(P):
    base = A.maxmargin.nuclear_dual(P.X, P.Z, P.opt)
    for s in (1e200, 1e-200):
        scaled = A.maxmargin.nuclear_dual(P.X * s, P.Z, P.opt)
        assert scaled.value * s == pytest.approx(base.value, rel=1e-7)
        assert torch.allclose(scaled.certificate, base.certificate, atol=1e-5)   # solver accuracy


def test_unverified_dual_raises(P, monkeypatch):
    class Broken:                                       # a "solver" whose answer is infeasible
        def __init__(self, rows):
            self.value = np.full(rows, 1e3)
    real = nuclear._dual_problem

    def fake(rows, d):
        problem, param, _ = real(rows, d)
        return problem, param, Broken(rows)
    monkeypatch.setattr(nuclear, "_dual_problem", fake)
    with pytest.raises(A.IllConditionedError, match="not verified"):
        A.maxmargin.nuclear_dual(P.X, P.Z, P.opt)


def test_first_order_solution_has_the_residue_it_is_there_to_show():
    P = A.random_problem(10, 5, 20, generator=torch.Generator().manual_seed(7))
    fo = A.first_order_nuclear_svm(P.X, P.Z, P.opt)
    accurate = A.att_svm(P.X, P.Z, P.opt, "nuc")
    assert fo.status.startswith("optimal") and fo.W.shape == (20, 20)
    assert float(torch.linalg.svdvals(fo.W).sum()) == pytest.approx(accurate.objective, rel=1e-3)
    assert A.numerical_rank(fo.W, 1e-12) > accurate.rank                      # residue above 1e-12


@pytest.mark.parametrize("bad", [torch.ones(3, 4), "x", None])
def test_bad_input_is_refused(P, bad):
    with pytest.raises((ValueError, TypeError)):
        A.maxmargin.nuclear_dual(bad, P.Z, P.opt)
    with pytest.raises((ValueError, TypeError)):
        A.first_order_nuclear_svm(bad, P.Z, P.opt)


def test_first_order_method_names_scs_linear_solver(monkeypatch):
    """SCS left to choose takes MKL's Pardiso where MKL loads and QDLDL elsewhere; the two round
    differently, so the authors' method names QDLDL and gives one answer on every machine."""
    import scs

    seen = []
    original = scs.SCS.__init__

    def spy(self, data, cone, **settings):
        seen.append(settings.get("linear_solver"))
        original(self, data, cone, **settings)

    monkeypatch.setattr(scs.SCS, "__init__", spy)
    P = A.random_problem(4, 3, 3, generator=torch.Generator().manual_seed(3))
    fo = A.first_order_nuclear_svm(P.X, P.Z, P.opt)
    assert seen == ["qdldl"] and fo.W is not None
