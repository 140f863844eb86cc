"""The closed-form normalized GD of the ReLU head against attnsvm.train (autograd)."""

import pytest
import torch

import attnsvm as A

F64 = torch.float64


def test_closed_form_equals_train_with_an_mlp_head():
    X, Y, Z, V, W0 = A.a6_draw(40, 6, A.set_seed(1))
    keep = (Y < 0).any(-1)
    X, Y, Z, V, W0 = X[keep], Y[keep], Z[keep], V[keep], W0[keep]
    problem = A.Problem(X, Y, Z, torch.ones(6, dtype=F64))
    att = A.WAttention(W0.clone())
    h = A.train(att, problem, 300, 0.1, "ngd", head=A.MLPHead(V), log_every=100,
                record_iterates=True, eps=2.2e-16)
    beta = A.ngd_relu_head(X, Y, Z, V, W0, steps=300, every=100, eps=2.2e-16, chunk=16)
    W = A.span_iterates(beta, X, Z, W0)
    assert W.shape == h.iterates.shape
    rel = (W - h.iterates).flatten(2).norm(dim=-1) / h.iterates.flatten(2).norm(dim=-1)
    assert float(rel.median()) < 1e-10 and float(rel.max()) < 1e-6


def test_a6_draw_protocol():
    X, Y, Z, V, W0 = A.a6_draw(5, 4, A.set_seed(2))
    assert torch.allclose(X.norm(dim=-1), torch.ones(5, 3, 4, dtype=F64))
    assert torch.allclose(V.flatten(1).norm(dim=-1), torch.ones(5, dtype=F64))
    assert bool((W0.abs() <= 0.5).all()) and set(Y.unique().tolist()) <= {-1.0, 1.0}


def test_bad_input():
    X, Y, Z, V, W0 = A.a6_draw(3, 4, A.set_seed(3))
    for args, message in (((X[0], Y, Z, V, W0), "X must have shape"), ((X, Y[:2], Z, V, W0), "Y must"),
                          ((X, Y * 0, Z, V, W0), "labels"), ((X, Y, Z, V[:, :2], W0), "V must")):
        with pytest.raises(ValueError, match=message):
            A.ngd_relu_head(*args, steps=2)
    with pytest.raises(ValueError):
        A.ngd_relu_head(X, Y, Z, V, W0, steps=2, lr=0.0)
    with pytest.raises(ValueError, match="beta must end"):
        A.span_iterates(torch.zeros(3, 5), X, Z, W0)
