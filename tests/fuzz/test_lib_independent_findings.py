"""Bad and extreme inputs found by an independent adversarial check of the library (each failed
before: an unclear crash inside NumPy/torch, or a silent NaN/inf/wrong answer)."""

import math

import pytest
import torch

import attnsvm as A

F64 = torch.float64


@pytest.fixture
def P():
    return A.random_problem(2, 3, 3, generator=A.set_seed(0))


@pytest.mark.parametrize("scale", [1e200, 1e300, 1e-200])
@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_att_svm_is_scale_invariant(P, scale, norm):
    base = A.att_svm(P.X, P.Z, P.opt, norm)
    big = A.att_svm(P.X * scale, P.Z, P.opt, norm)
    assert torch.allclose(big.W * scale, base.W, rtol=1e-6, atol=0)
    assert big.margins[torch.isfinite(big.margins)].min() >= 1 - 1e-6


def test_att_svm_with_no_visible_competitor_says_so(P):
    only_selected = torch.nn.functional.one_hot(P.opt, 3).bool()
    with pytest.raises(ValueError, match="no constraint"):
        A.att_svm(P.X, P.Z, P.opt, mask=only_selected)


def test_empty_dimensions_are_refused(P):
    K = torch.tensor([[[1.0, 2, 0.5], [-1, 0, 2]]], dtype=F64)
    with pytest.raises(ValueError, match="T >= 2"):
        A.maxmargin.relaxed_p_svm(K[:, :1], [0], [True])
    with pytest.raises(ValueError, match="d >= 1"):
        A.maxmargin.relaxed_p_svm(K[..., :0], [0], [True])
    sets = torch.nn.functional.one_hot(P.opt, 3).bool()
    with pytest.raises(ValueError, match="d >= 1"):
        A.gen_svm(P.X[..., :0], P.Z[:, :0], sets)


def test_logits_refuse_parameters_of_another_dtype(P):
    with pytest.raises(ValueError, match="float32"):
        A.WAttention(torch.eye(3)).logits(P)
    with pytest.raises(ValueError, match="float32"):
        A.PromptAttention(torch.ones(3)).logits(P)


def test_numerical_rank_of_tiny_and_subnormal_matrices():
    assert int(A.numerical_rank(torch.eye(3, dtype=F64) * 1e-300)) == 3      # tiny but normal
    assert int(A.numerical_rank(torch.eye(3) * 1e-37)) == 3
    R = torch.zeros(4, 4, dtype=F64)
    R[0, 0], R[1, 2] = 1.0, 0.5
    for W in (torch.eye(3) * 1e-40, torch.eye(3, dtype=F64) * 1e-310, R * 1e-320):
        with pytest.raises(ValueError, match="subnormal"):           # digits lost: refused
            A.numerical_rank(W)


def test_subnormal_data_are_refused_by_the_solvers(P):
    with pytest.raises(ValueError, match="subnormal"):
        A.att_svm(P.X * 5e-324 / P.X.abs().max(), P.Z, P.opt)


def test_probability_on_and_off_need_softmax_rows():
    for mass in (A.model.probability_on, A.model.probability_off):
        with pytest.raises(ValueError, match="sum to 1"):
            mass(torch.full((2, 4), 0.1, dtype=F64), torch.tensor([0, 1]))
        with pytest.raises(ValueError, match="sum to 1"):       # each row in [0, 1], one sums to 1.5
            mass(torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.5]], dtype=F64), torch.tensor([0, 1]))
    s = torch.softmax(torch.randn(2, 4, dtype=F64), -1)
    assert torch.allclose(A.model.probability_off(s, torch.tensor([0, 1])),
                          1 - s[torch.arange(2), torch.tensor([0, 1])])


def test_proportion_interval_takes_any_whole_numbers():
    assert A.book.proportion_interval(10 ** 400, 10 ** 401) == pytest.approx((0.1, 0.1))
    low, high = A.book.proportion_interval(1, 10 ** 300)     # the same interval as 1 of 1e6, scaled
    ref_low, ref_high = A.book.proportion_interval(1, 10 ** 6)
    assert low == pytest.approx(ref_low * 1e-294, rel=1e-6) and high == pytest.approx(ref_high * 1e-294, rel=1e-6)


def test_claim_kind_and_value_are_checked():
    with pytest.raises(ValueError, match="kind must be one of"):
        A.book.claim("k", 0.5, True, kind=["observed"])
    for value in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            A.book.claim("k", value, True)
    assert A.book.claim("k", "not defined: no solution", True) == "observed"


def test_joint_svm_objectives_do_not_overflow():
    X = torch.tensor([[[2.0, 1], [0, 3]]], dtype=F64)
    base = A.maxmargin.v_svm(X, [-1.0], [0]).objective
    for scale in (1e-200, 1e-300):
        assert A.maxmargin.v_svm(X * scale, [-1.0], [0]).objective == pytest.approx(base / scale, rel=1e-12)
    K = torch.tensor([[[1.0, 2, 0.5], [-1, 0, 2]]], dtype=F64)
    ref = A.maxmargin.relaxed_p_svm(K, [0], [True]).objective
    assert A.maxmargin.relaxed_p_svm(K * 1e-300, [0], [True]).objective == pytest.approx(ref * 1e300, rel=1e-12)


def test_seeds_that_would_alias_are_refused():
    for seed in (2 ** 32, 2 ** 32 + 5, 2 ** 63 - 1):
        with pytest.raises(ValueError, match="2\\*\\*32"):
            A.set_seed(seed)
    P = A.random_problem(2, 3, 3, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        A.regularization_path(A.WAttention.zeros(3), P, [1.0, 2.0], restarts=1, seed=2 ** 32 + 5)


def test_overflowing_outputs_are_refused(P):
    big = A.Problem(P.X * 1e10, P.Y, P.Z * 1e10, P.v)
    with pytest.raises(ValueError, match="overflow"):
        A.predict(A.WAttention(torch.eye(3, dtype=F64) * 1e308), big)
    with pytest.raises(ValueError, match="overflows"):
        A.empirical_risk(A.WAttention(-torch.eye(3, dtype=F64) * 1e5), A.Problem(P.X * 1e3, P.Y, P.Z, P.v),
                         loss="exponential")
    with pytest.raises(ValueError, match="NaN"):
        A.attention_output(P.X, torch.full((2, 3), float("nan"), dtype=F64))
    with pytest.raises(ValueError, match="every logit -inf"):
        A.attention_output(P.X, torch.full((2, 3), -float("inf"), dtype=F64))


def test_python_floats_are_read_in_float64():
    """A Python float was read through torch's default float32 before widening (0.9 -> 0.89999998)."""
    from attnsvm.model.utils import as_array, as_tensor
    assert as_tensor(0.9, "x").item() == 0.9 and as_tensor(0.9, "x").dtype == torch.float64
    assert as_array(0.1, "x").item() == 0.1
    assert as_array(3, "x").dtype == torch.int64 and as_array(True, "x").dtype == torch.bool
