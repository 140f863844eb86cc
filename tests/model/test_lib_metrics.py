"""Metrics: correlation, numerical rank, selected tokens (attnsvm.model.metrics)."""

import math

import pytest
import torch

import attnsvm as A


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- corr ----------------------------------------------------------------------------------------

def test_corr_basic_values():
    W = rand(4, 4)
    assert float(A.corr(W, W)) == pytest.approx(1.0, abs=1e-15)
    assert float(A.corr(W, -W)) == pytest.approx(-1.0, abs=1e-15)
    assert float(A.corr(torch.eye(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))) == 0.0
    # by hand: <(1,0),(1,1)> / (1 * sqrt 2)
    one = torch.tensor([1.0, 0.0], dtype=torch.float64)
    diag = torch.tensor([1.0, 1.0], dtype=torch.float64)
    assert float(A.corr(one, diag)) == pytest.approx(1 / math.sqrt(2), rel=1e-15)


def test_corr_scale_invariant_and_symmetric():
    W, V = rand(5, 5, seed=1), rand(5, 5, seed=2)
    c = A.corr(W, V)
    for a, b in ((3.0, 1.0), (1e-100, 1.0), (1.0, 1e100), (7.0, 1e-3)):
        assert float(A.corr(a * W, b * V)) == pytest.approx(float(c), rel=1e-12)
    assert float(A.corr(V, W)) == pytest.approx(float(c), rel=1e-15)
    assert float(A.corr(-2 * W, V)) == pytest.approx(-float(c), rel=1e-12)


def test_corr_scale_invariant_at_extreme_scales():
    W, V = rand(5, 5, seed=1), rand(5, 5, seed=2)
    c = float(A.corr(W, V))
    assert float(A.corr(1e-200 * W, V)) == pytest.approx(c, rel=1e-12)
    assert float(A.corr(W, 1e200 * V)) == pytest.approx(c, rel=1e-12)


def test_corr_batch_dims_and_broadcast():
    W, V = rand(6, 3, 3, seed=3), rand(6, 3, 3, seed=4)
    per_trial = A.corr(W, V, batch_dims=1)
    assert per_trial.shape == (6,)
    for b in range(6):
        assert float(per_trial[b]) == pytest.approx(float(A.corr(W[b], V[b])), rel=1e-14)
    ref = V[0]
    shared = A.corr(W, ref, batch_dims=1)          # one reference for every trial
    assert torch.allclose(shared, torch.stack([A.corr(W[b], ref) for b in range(6)]), rtol=1e-14)
    grid = A.corr(rand(2, 4, 3, 3, seed=5), rand(2, 4, 3, 3, seed=6), batch_dims=2)
    assert grid.shape == (2, 4)
    # without batch_dims everything is flattened: one number
    assert A.corr(W, V).shape == ()


def test_corr_zero_is_nan_and_ints_promoted():
    assert math.isnan(float(A.corr(torch.zeros(3, 3), rand(3, 3))))
    assert torch.isnan(A.corr(torch.zeros(2, 3, 3), rand(2, 3, 3), 1)).all()
    c = A.corr(torch.tensor([1, 0]), torch.tensor([1, 1]))
    assert c.dtype == torch.float64 and float(c) == pytest.approx(1 / math.sqrt(2))


# --- numerical_rank -----------------------------------------------------------------------------

def test_numerical_rank_relative_tolerance():
    U, _ = torch.linalg.qr(rand(6, 6, seed=7))
    V, _ = torch.linalg.qr(rand(6, 6, seed=8))
    sigma = torch.tensor([1.0, 1e-3, 1e-5, 1e-8, 0.0, 0.0], dtype=torch.float64)
    W = U @ torch.diag(sigma) @ V.T
    assert int(A.numerical_rank(W, rank_tol=1e-6)) == 3
    assert int(A.numerical_rank(W, rank_tol=1e-4)) == 2
    assert int(A.numerical_rank(W, rank_tol=1e-10)) == 4
    # relative: scaling does not change it (an absolute threshold would)
    for scale in (1e-12, 1e-3, 1e6):
        assert int(A.numerical_rank(scale * W, rank_tol=1e-6)) == 3
    assert int(A.numerical_rank(torch.zeros(4, 4))) == 0
    assert int(A.numerical_rank(torch.eye(5))) == 5


def test_numerical_rank_batched():
    a = rand(4, 1, seed=9)
    W = torch.stack([torch.eye(4), a @ a.T, torch.zeros(4, 4), rand(4, 4, seed=10)])
    assert A.numerical_rank(W).tolist() == [4, 1, 0, 4]
    assert A.numerical_rank(W.reshape(2, 2, 4, 4)).shape == (2, 2)


# --- selections ---------------------------------------------------------------------------------

def test_selected_tokens_probability_and_global():
    probs = torch.tensor([[[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]],
                          [[0.3, 0.3, 0.4], [0.0, 0.0, 1.0]]], dtype=torch.float64)
    assert A.selected_tokens(probs).tolist() == [[1, 0], [2, 2]]
    assert torch.allclose(A.max_probability(probs), torch.tensor([0.6, 0.7], dtype=torch.float64))
    alpha = torch.tensor([[0, 0], [2, 1]])
    assert torch.allclose(A.model.probability_on(probs, alpha),
                          torch.tensor([[0.1, 0.5], [0.4, 0.0]], dtype=torch.float64))
    X = torch.tensor([[[0.0, 1.0], [0.0, 2.0], [0.0, 3.0]]] * 2, dtype=torch.float64)
    p = A.Problem(X, torch.tensor([1.0, -1.0]), torch.ones(2, 2), torch.tensor([0.0, 1.0]))
    assert p.opt.tolist() == [2, 0]
    assert bool(A.model.is_global(p, torch.tensor([2, 0])))
    assert not bool(A.model.is_global(p, torch.tensor([2, 1])))


def test_broadcast_shape_is_torchs():
    from attnsvm.model.utils import broadcast_shape
    for shapes in [((2, 3), (3,)), ((), (4, 1)), ((5, 1, 2), (1, 7, 1)), ((0, 3), (1, 3)), ((2,),)]:
        assert broadcast_shape(*shapes) == torch.broadcast_shapes(*shapes)
        assert isinstance(broadcast_shape(*shapes), torch.Size)
    with pytest.raises(RuntimeError):
        broadcast_shape((2, 3), (4, 3))
