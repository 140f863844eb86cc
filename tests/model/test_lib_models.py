"""Attention parameterizations, heads, outputs and losses (attnsvm.model.models, attnsvm.model.heads).

Equivalences between the parameterizations (W = K Q^T, p = W z), the re-centred output against the
textbook one (value, and gradient under saturation against a high-precision reference), autograd
against central finite differences, and the errors raised on bad input.
"""

import math

import mpmath
import pytest
import torch

import attnsvm as A

F64 = torch.float64


def rand(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.fixture
def batched():
    return A.random_problem(4, 5, 6, trials=3, generator=A.set_seed(0))


# --- equivalences between parameterizations ---------------------------------------------------

@pytest.mark.parametrize("m", [2, 6, 9])
@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_w_forward_equals_kq_forward(batched, m, loss):
    K, Q = rand(3, 6, m, seed=1), rand(3, 6, m, seed=2)
    kq = A.KQAttention(K, Q)
    w = A.WAttention(K @ Q.transpose(-1, -2))
    assert torch.allclose(kq.combined(), w.combined(), rtol=0, atol=1e-14)
    assert torch.allclose(kq.logits(batched), w.logits(batched), rtol=1e-12, atol=1e-13)
    assert torch.allclose(kq.probabilities(batched), w.probabilities(batched), rtol=1e-12, atol=1e-14)
    assert torch.allclose(A.predict(kq, batched), A.predict(w, batched), rtol=1e-12, atol=1e-14)
    assert torch.allclose(A.empirical_risk(kq, batched, loss=loss),
                          A.empirical_risk(w, batched, loss=loss), rtol=1e-12, atol=1e-14)


def test_logits_by_hand():
    # a_it = x_it^T W z_i
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], dtype=F64)
    p = A.Problem(X, torch.ones(1), torch.tensor([[1.0, 2.0]]), torch.tensor([1.0, 0.0]))
    W = torch.tensor([[1.0, 0.0], [3.0, -1.0]], dtype=F64)       # W z = (1, 1)
    assert A.WAttention(W).logits(p).tolist() == [[1.0, 1.0, 2.0]]
    s = torch.softmax(torch.tensor([1.0, 1.0, 2.0], dtype=F64), 0)
    out = float(A.predict(A.WAttention(W), p).detach()[0])
    assert out == pytest.approx(float(s[0] + s[2]), rel=1e-15)
    risk = A.empirical_risk(A.WAttention(W), p)
    assert float(risk.detach()) == pytest.approx(math.log1p(math.exp(-float(s[0] + s[2]))), rel=1e-14)


def test_trials_are_independent(batched):
    W = rand(3, 6, 6, seed=3)
    att = A.WAttention(W)
    logits, risk = att.logits(batched), A.empirical_risk(att, batched)
    for b in range(3):
        single = A.WAttention(W[b])
        assert torch.allclose(single.logits(batched.trial(b)), logits[b], rtol=1e-13, atol=1e-14)
        assert torch.allclose(A.empirical_risk(single, batched.trial(b)), risk[b], rtol=1e-13)


def test_prompt_equals_w_times_z_when_queries_equal():
    g = A.set_seed(4)
    base = A.random_problem(5, 4, 3, generator=g)
    z = base.Z[0]
    problem = base.with_queries(z.expand(5, 3).clone())
    W = rand(3, 3, seed=5)
    p_att = A.PromptAttention(W @ z)
    w_att = A.WAttention(W)
    assert torch.allclose(p_att.logits(problem), w_att.logits(problem), rtol=1e-13, atol=1e-14)
    assert torch.allclose(A.predict(p_att, problem), A.predict(w_att, problem), rtol=1e-13)
    assert torch.allclose(A.empirical_risk(p_att, problem), A.empirical_risk(w_att, problem),
                          rtol=1e-13)
    # a fixed key matrix: logits x^T W_key p = x^T (W_key p z^T / |z|^2) z
    Wk, p = rand(3, 3, seed=6), rand(3, seed=7)
    keyed = A.PromptAttention(p, key_matrix=Wk)
    equivalent = A.WAttention(torch.outer(Wk @ p, z) / z.dot(z))
    assert torch.allclose(keyed.logits(problem), equivalent.logits(problem), rtol=1e-12, atol=1e-13)
    assert torch.equal(keyed.combined(), p)


def test_init_protocols():
    kq = A.KQAttention.init(5, trials=4, generator=A.set_seed(8))
    assert kq.K.shape == kq.Q.shape == (4, 5, 5)
    assert torch.equal(kq.Q, torch.zeros_like(kq.Q))
    assert torch.equal(kq.K, 0.1 * torch.randn(4, 5, 5, generator=A.set_seed(8), dtype=F64))
    assert A.KQAttention.init(5, m=2).K.shape == (5, 2)
    w = A.WAttention.zeros(5, trials=4)
    assert w.W.shape == (4, 5, 5) and not w.W.any() and w.W.requires_grad
    # parameters are copies: the caller's tensor is not modified by training
    W0 = rand(5, 5, seed=9)
    att = A.WAttention(W0)
    with torch.no_grad():
        att.W.add_(1.0)
    assert torch.equal(W0, rand(5, 5, seed=9))


# --- the re-centred output -------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.1, 3.0, 30.0])
def test_recentred_output_equals_textbook_output(scale):
    X, logits = rand(3, 4, 6, 5, seed=10), rand(3, 4, 6, seed=11, scale=scale)
    stable = A.attention_output(X, logits, stable=True)
    textbook = A.attention_output(X, logits, stable=False)
    direct = torch.einsum("...nt,...ntd->...nd", torch.softmax(logits, -1), X)
    assert torch.allclose(stable, textbook, rtol=1e-12, atol=1e-14)
    assert torch.allclose(stable, direct, rtol=1e-12, atol=1e-14)
    p = A.random_problem(4, 6, 5, trials=3, generator=A.set_seed(12))
    att = A.WAttention(rand(3, 5, 5, seed=13, scale=scale))
    assert torch.allclose(A.empirical_risk(att, p, stable=True), A.empirical_risk(att, p, stable=False),
                          rtol=1e-12, atol=1e-15)


def _reference_logit_gradient(logits, values, dps=400):
    """df/da_t for f = sum_t softmax(a)_t c_t, in high precision (mpmath): s_t (c_t - f)."""
    mpmath.mp.dps = dps
    a = [mpmath.mpf(float(x)) for x in logits]
    c = [mpmath.mpf(float(x)) for x in values]
    top = max(a)
    w = [mpmath.exp(x - top) for x in a]
    s = [x / mpmath.fsum(w) for x in w]
    f = mpmath.fsum(si * ci for si, ci in zip(s, c))
    return [float(si * (ci - f)) for si, ci in zip(s, c)], f


def test_gradient_accurate_when_softmax_saturates():
    """Logit gaps of 60-200: every entry of df/da (also the top token's, ~e^-gap) to rel 1e-8,
    where the textbook formula returns exactly 0 for the top token."""
    X = rand(1, 4, 3, seed=14)
    v = rand(3, seed=15)
    values = X[0] @ v
    for gaps in ([60.0, 75.0, 90.0], [100.0, 150.0, 200.0], [80.0, 80.5, 199.0]):
        logits = torch.tensor([[5.0] + [5.0 - g for g in gaps]], dtype=F64)
        reference, _ = _reference_logit_gradient(logits[0], values)
        reference = torch.tensor(reference, dtype=F64)
        for stable in (True, False):
            a = logits.clone().requires_grad_(True)
            out = A.attention_output(X, a, stable=stable) @ v
            (grad,) = torch.autograd.grad(out.sum(), a)
            rel = ((grad[0] - reference).abs() / reference.abs()).max()
            if stable:
                assert rel < 1e-8, (gaps, grad, reference)
            else:   # the cancellation the re-centring removes: the top entry comes out 0 or noise
                assert rel > 1e-2
        assert (reference != 0).all()


def test_weight_gradient_accurate_when_softmax_saturates():
    """dL/dW (logistic loss, autograd through the re-centred output) against a 400-digit
    reference, with tokens placed so that the logits have prescribed gaps of 60 to 200."""
    W, Z, v = rand(3, 3, seed=16), rand(3, 3, seed=17), rand(3, seed=18)
    gaps = torch.tensor([[0.0, 60.0, 120.0, 200.0], [0.0, 75.0, 80.0, 150.0],
                         [0.0, 100.0, 110.0, 190.0]], dtype=F64)
    U = Z @ W.T                                              # u_i = W z_i
    unit = U / U.norm(dim=-1, keepdim=True)
    noise = rand(3, 4, 3, seed=19)
    noise = noise - (noise * unit[:, None]).sum(-1, keepdim=True) * unit[:, None]
    X = (2.0 - gaps)[..., None] * (U / U.norm(dim=-1, keepdim=True) ** 2)[:, None] + noise
    p = A.Problem(X, torch.tensor([1.0, -1.0, 1.0]), Z, v)
    att = A.WAttention(W)
    logits = att.logits(p).detach()
    assert torch.allclose(logits, 2.0 - gaps, atol=1e-12)
    values = p.X @ p.v
    G = torch.zeros(3, 4, dtype=F64)
    for i in range(3):
        df, f = _reference_logit_gradient(logits[i], values[i])
        dloss = -1 / (1 + mpmath.exp(float(p.Y[i]) * f))          # d/du log(1 + e^-u)
        G[i] = torch.tensor([float(dloss * float(p.Y[i]) * x / 3) for x in df], dtype=F64)
    reference = torch.einsum("nt,ntd,ne->de", G, p.X, p.Z)
    (grad,) = torch.autograd.grad(A.empirical_risk(att, p).sum(), att.params)
    assert float((grad - reference).norm() / reference.norm()) < 1e-8
    # the textbook output loses the top token's e^-60 contribution entirely
    (naive,) = torch.autograd.grad(A.empirical_risk(att, p, stable=False).sum(), att.params)
    assert float((naive - reference).norm() / reference.norm()) > 1e-3


# --- autograd against finite differences ------------------------------------------------------

def _fd_check(params, risk_fn, h=1e-6, rtol=1e-6):
    grads = torch.autograd.grad(risk_fn().sum(), params)
    for p, g in zip(params, grads):
        fd = torch.zeros_like(p)
        flat, fd_flat = p.data.view(-1), fd.view(-1)
        for k in range(flat.numel()):
            old = float(flat[k])
            with torch.no_grad():
                flat[k] = old + h
                up = float(risk_fn().sum())
                flat[k] = old - h
                down = float(risk_fn().sum())
            flat[k] = old
            fd_flat[k] = (up - down) / (2 * h)
        err = float((fd - g).norm() / g.norm())
        assert err < rtol, err
        assert float(g.norm()) > 1e-6                  # a non-trivial gradient was checked


@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_fd_gradient_W(loss):
    p = A.random_problem(4, 5, 4, trials=2, generator=A.set_seed(20))
    att = A.WAttention(rand(2, 4, 4, seed=21, scale=2.0))
    _fd_check(att.params, lambda: A.empirical_risk(att, p, loss=loss))


@pytest.mark.parametrize("m", [2, 4])
def test_fd_gradient_KQ(m):
    p = A.random_problem(4, 5, 4, generator=A.set_seed(22))
    att = A.KQAttention(rand(4, m, seed=23), rand(4, m, seed=24))
    _fd_check(att.params, lambda: A.empirical_risk(att, p))


def test_fd_gradient_p_with_key_matrix():
    p = A.random_problem(4, 5, 4, generator=A.set_seed(25))
    for key in (None, rand(4, 4, seed=26)):
        att = A.PromptAttention(rand(4, seed=27, scale=2.0), key_matrix=key)
        _fd_check(att.params, lambda: A.empirical_risk(att, p, loss="exponential"))


def test_fd_gradient_trainable_v():
    p = A.random_problem(4, 5, 4, generator=A.set_seed(28))
    att, head = A.WAttention(rand(4, 4, seed=29)), A.LinearHead(rand(4, seed=30))
    _fd_check(att.params + head.params, lambda: A.empirical_risk(att, p, head))


def test_fd_gradient_mlp_head():
    p = A.random_problem(4, 5, 4, generator=A.set_seed(31))
    V = rand(4, 6, seed=32)
    head = A.MLPHead(V / V.norm(), a=rand(6, seed=33))
    for att in (A.WAttention(rand(4, 4, seed=34, scale=2.0)), A.KQAttention(rand(4, 4, seed=35),
                                                                         rand(4, 4, seed=36))):
        hidden = torch.einsum("ntd,dk->ntk", p.X, head.V)
        assert hidden.abs().min() > 1e-4        # away from the ReLU kinks at this seed
        _fd_check(att.params, lambda: A.empirical_risk(att, p, head))


def test_mlp_head_by_hand():
    r = torch.tensor([[1.0, -2.0]], dtype=F64)
    V = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], dtype=F64)   # V^T r = (1, -2, -1)
    assert float(A.MLPHead(V)(r, None)[0]) == 1.0
    assert float(A.MLPHead(V, torch.tensor([2.0, 1.0, 1.0]))(r, None)[0]) == 2.0


# --- bad input -----------------------------------------------------------------------------------

def test_bad_parameter_shapes():
    with pytest.raises(ValueError, match=r"W must have shape \(\.\.\., d, d\)"):
        A.WAttention(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="K and Q must both have shape"):
        A.KQAttention(torch.zeros(4, 2), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="W contains NaN or inf"):
        A.WAttention(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="p contains NaN or inf"):
        A.PromptAttention(torch.tensor([1.0, float("inf")]))


def test_dimension_mismatch_and_unknown_loss(batched):
    with pytest.raises(ValueError, match="act on dimension 4, the tokens have d=6"):
        A.WAttention.zeros(4, trials=3).logits(batched)
    with pytest.raises(ValueError, match="act on dimension 4, the tokens have d=6"):
        A.KQAttention.init(4, trials=3).logits(batched)
    with pytest.raises(ValueError, match="act on dimension 5, the tokens have d=6"):
        A.PromptAttention(torch.zeros(3, 5)).logits(batched)
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        A.empirical_risk(A.WAttention.zeros(6, trials=3), batched, loss="hinge")


def test_penalized_head_prefers_the_hand_computed_mixture():
    """Orthonormal tokens e1, e2 with v = (1, 1) and lam = 1: h(s e1 + (1-s) e2) = 1 - s^2 - (1-s)^2,
    largest at s = 1/2 (h = 1/2), above either token alone (h = 0)."""
    X = torch.eye(2, dtype=torch.float64)[None]
    P = A.Problem(X, torch.ones(1, dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                  torch.tensor([1.0, 1.0], dtype=torch.float64))
    head = A.model.PenalizedHead(torch.tensor([1.0, 1.0], dtype=torch.float64), 1.0)
    for a, expected in ((0.0, 0.5), (50.0, 0.0)):
        W = torch.tensor([[a, 0.0], [0.0, 0.0]], dtype=torch.float64)
        assert abs(float(A.predict(A.WAttention(W), P, head)) - expected) < 1e-12
    with pytest.raises(ValueError):
        A.model.PenalizedHead(torch.ones(2), -1.0)
    with pytest.raises(ValueError, match="dimension"):
        A.empirical_risk(A.WAttention.zeros(2), P, A.model.PenalizedHead(torch.ones(3, dtype=torch.float64), 1.0))


def test_pytorch_default_start_is_nn_linear_default():
    """The authors' start: nn.Linear's default weights, uniform on +-1/sqrt(fan_in)."""
    d = 10
    ref = torch.nn.Linear(d, d, bias=False).weight.detach()
    bound = 1 / d ** 0.5
    assert float(ref.abs().max()) <= bound                       # PyTorch's own bound is ours
    w = A.WAttention.pytorch_default(d, trials=200, generator=A.set_seed(0))
    kq = A.KQAttention.pytorch_default(d, m=4, trials=200, generator=A.set_seed(0))
    assert w.W.shape == (200, d, d) and kq.K.shape == kq.Q.shape == (200, d, 4)
    for t in (w.W, kq.K, kq.Q):
        t = t.detach()
        assert float(t.abs().max()) <= bound and float(t.abs().max()) > 0.99 * bound
        assert abs(float(t.mean())) < 0.01 and abs(float(t.var()) - bound ** 2 / 3) < 0.01 * bound ** 2
    assert not torch.equal(kq.K, kq.Q)                             # two independent draws
    again = A.KQAttention.pytorch_default(d, m=4, trials=200, generator=A.set_seed(0))
    assert torch.equal(again.K, kq.K) and torch.equal(again.Q, kq.Q)
    with pytest.raises(ValueError):
        A.WAttention.pytorch_default(0)
