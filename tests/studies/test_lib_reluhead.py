"""The closed-form normalized GD of the ReLU head against attnsvm.train (autograd)."""

import pytest
import torch

import attnsvm as A

F64 = torch.float64


def test_closed_form_equals_train_with_an_mlp_head():
    X, Y, Z, V, W0 = A.studies.a6_draw(40, 6, A.set_seed(1))
    keep = (Y < 0).any(-1)
    X, Y, Z, V, W0 = X[keep], Y[keep], Z[keep], V[keep], W0[keep]
    problem = A.Problem(X, Y, Z, torch.ones(6, dtype=F64))
    att = A.WAttention(W0.clone())
    h = A.train(att, problem, 300, 0.1, "ngd", head=A.MLPHead(V), log_every=100,
                record_iterates=True, eps=2.2e-16)
    beta = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=300, every=100, eps=2.2e-16, chunk=16)
    W = A.studies.span_iterates(beta, X, Z, W0)
    assert W.shape == h.iterates.shape
    rel = (W - h.iterates).flatten(2).norm(dim=-1) / h.iterates.flatten(2).norm(dim=-1)
    assert float(rel.median()) < 1e-10 and float(rel.max()) < 1e-6


def test_a6_draw_protocol():
    X, Y, Z, V, W0 = A.studies.a6_draw(5, 4, A.set_seed(2))
    assert torch.allclose(X.norm(dim=-1), torch.ones(5, 3, 4, dtype=F64))
    assert torch.allclose(V.flatten(1).norm(dim=-1), torch.ones(5, dtype=F64))
    assert bool((W0.abs() <= 0.5).all()) and set(Y.unique().tolist()) <= {-1.0, 1.0}


def test_bad_input():
    X, Y, Z, V, W0 = A.studies.a6_draw(3, 4, A.set_seed(3))
    for args, message in (((X[0], Y, Z, V, W0), "X must have shape"), ((X, Y[:2], Z, V, W0), "Y must"),
                          ((X, Y * 0, Z, V, W0), "labels"), ((X, Y, Z, V[:, :2], W0), "V must")):
        with pytest.raises(ValueError, match=message):
            A.studies.ngd_relu_head(*args, steps=2)
    with pytest.raises(ValueError):
        A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=2, lr=0.0)
    with pytest.raises(ValueError, match="beta must end"):
        A.studies.span_iterates(torch.zeros(3, 5), X, Z, W0)


def _reference_ngd(X, Y, Z, V, W0, steps, lr, eps, every):
    """The step of the module docstring written plainly, one run batch at a time, batch last."""
    b, n, T, _ = X.shape
    a0 = torch.einsum("bntd,bde,bne->ntb", X, W0, Z).reshape(n * T, b).contiguous()
    K = (torch.einsum("bntd,bmsd->ntmsb", X, X)
         * torch.einsum("bnd,bmd->nmb", Z, Z)[:, None, :, None]).reshape(n * T, n * T, b).contiguous()
    XV, y = torch.einsum("bntd,bdk->ntkb", X, V).contiguous(), Y.T.contiguous()   # batch innermost
    beta, kept = torch.zeros(n * T, b, dtype=F64), []
    for step in range(steps + 1):
        if step % every == 0:
            kept.append(beta.T.clone())
            a = (K * beta).sum(1) + a0
        if step == steps:
            break
        s = torch.softmax(a.view(n, T, b), dim=1)
        hid = (s[:, :, None] * XV).sum(1).clamp(min=0)
        f = hid.sum(1)
        g = (hid.sign()[:, None] * XV).sum(2)
        c = ((g[:, :, None, :] - g[:, None, :, :]) * s[:, None, :, :]).sum(2)
        delta = (c * s * (torch.sigmoid(-y * f) * y * (-1.0 / n))[:, None]).view(n * T, b)
        top = delta.abs().amax(0)
        safe = torch.where(top > 0, top, torch.ones_like(top))
        dn = delta / safe
        Kd = (K * dn).sum(1)
        coef = lr / ((Kd * dn).sum(0).clamp_min(0).sqrt() + eps / safe)
        coef = torch.where(top > 0, coef, torch.zeros_like(coef))
        beta, a = beta - dn * coef, a - Kd * coef
    return torch.stack(kept)


@pytest.mark.parametrize("d, eps", [(4, 2.220446049250313e-16), (6, 1e-300), (5, 0.0)])
def test_buffered_step_has_the_digits_of_the_plain_step(d, eps):
    """In-place buffers change no digit of the iterates, in one chunk or several (each chunk is a
    batch of its own: its last runs may take the scalar path of the vectorized kernels)."""
    X, Y, Z, V, W0 = A.studies.a6_draw(61, d, A.set_seed(10 + d))
    V[3] = 0.0                                     # a run with a flat loss: zero gradient, no step
    args = (0.1, eps, 40)
    whole = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=120, lr=0.1, eps=eps, every=40)
    assert torch.equal(whole, _reference_ngd(X, Y, Z, V, W0, 120, *args))
    pieces = A.studies.ngd_relu_head(X, Y, Z, V, W0, steps=120, lr=0.1, eps=eps, every=40, chunk=24)
    reference = torch.cat([_reference_ngd(X[lo:lo + 24], Y[lo:lo + 24], Z[lo:lo + 24], V[lo:lo + 24],
                                          W0[lo:lo + 24], 120, *args) for lo in (0, 24, 48)], dim=1)
    assert torch.equal(pieces, reference)
    assert float((pieces - whole).abs().max()) < 1e-10 * float(whole.abs().max())
    assert float(whole[:, 3].abs().max()) == 0.0 and bool(torch.isfinite(whole).all())
