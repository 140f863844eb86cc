"""Normalized GD for the ReLU head in closed form, batched over tens of thousands of runs (paper A's
multi-token experiment, the reproduction report, A6).

For the head ``h(r) = sum_j ReLU(V_j^T r)`` and logits ``a_it = x_it^T W z_i``, with
``s_i = softmax(a_i)`` and ``g_it = dh/ds_it = sum_j 1[V_j^T r_i > 0] V_j^T x_it``, the logistic
risk has ``dL/da_it = delta_it = (1/n) loss'(Y_i h_i) Y_i s_it sum_tau s_itau (g_it - g_itau)`` (the
pairwise form avoids cancellation once the softmax saturates) and
``grad_W L = sum_it delta_it x_it z_i^T``. Every step therefore moves W in the span of the ``nT``
features ``F_it = x_it z_i^T``: ``W_k = W_0 + sum_it beta_it F_it``. With the Gram matrix
``K = <F_it, F_jtau> = (x_it^T x_jtau)(z_i^T z_j)`` the logits are ``a(0) + K beta`` and
``||grad_W L||_F^2 = delta^T K delta``, so a step of normalized GD,
``beta <- beta - lr delta / (sqrt(delta^T K delta) + eps)``, updates ``nT`` numbers per run instead of
``d^2``. It equals ``train(WAttention(W0), problem, method="ngd", head=MLPHead(V), eps=eps)`` up to
rounding (tests/studies/test_lib_reluhead.py), several times faster (book chapter 6 measures the factor).
"""

from __future__ import annotations

import torch

from ..model.utils import DEFAULT_DTYPE, as_tensor, check_count, check_dtype, check_generator, check_positive


def a6_draw(count: int, d: int, generator: torch.Generator | None = None, n: int = 3, T: int = 4,
            dtype: torch.dtype = DEFAULT_DTYPE) -> tuple[torch.Tensor, ...]:
    """``count`` runs of the A6 protocol of the authors' experiment: unit-norm Gaussian tokens
    ``X (count, n, T, d)`` and queries ``Z (count, n, d)``, labels ``Y = sign(N(0, 1))``, a
    Gaussian ``V (count, d, d)`` scaled to ``||V||_F = 1`` and ``W(0)`` with entries uniform on
    ``(-1/sqrt(d), 1/sqrt(d))`` (PyTorch's default linear-layer initialization). Runs without a
    ``-1`` label are kept: the authors skip them, and so should the caller. Returns
    ``(X, Y, Z, V, W0)``."""
    count, d = check_count(count, "count", 1), check_count(d, "d", 1)
    n, T = check_count(n, "n", 1), check_count(T, "T", 2)
    check_generator(generator)
    dtype = check_dtype(dtype)
    g = generator
    X = torch.randn(count, n, T, d, generator=g, dtype=dtype)
    X = X / X.norm(dim=-1, keepdim=True)
    Z = torch.randn(count, n, d, generator=g, dtype=dtype)
    Z = Z / Z.norm(dim=-1, keepdim=True)
    Y = torch.sign(torch.randn(count, n, generator=g, dtype=dtype))
    V = torch.randn(count, d, d, generator=g, dtype=dtype)
    V = V / V.norm(dim=(-2, -1), keepdim=True)
    W0 = (2 * torch.rand(count, d, d, generator=g, dtype=dtype) - 1) / d ** 0.5
    return X, Y, Z, V, W0


def ngd_relu_head(X, Y, Z, V, W0, steps: int = 2000, lr: float = 0.1, eps: float = 0.0,
                  every: int = 100, chunk: int = 2048) -> torch.Tensor:
    """Normalized GD on W for the ReLU head, logistic loss (see the module docstring).

    ``X (B, n, T, d)``, ``Y (B, n)`` in ``{-1, +1}``, ``Z (B, n, d)``, ``V (B, d, k)``, ``W0 (B, d, d)``.
    ``eps`` is the authors' safeguard (normalize by ``||g|| + eps``). Runs are processed ``chunk``
    at a time with the batch as the last, contiguous dimension (the last runs of a small last chunk
    may take the scalar path of the vectorized kernels: keep ``chunk`` fixed to reproduce digits). Returns the coefficients
    ``beta`` every ``every`` steps, shape ``(steps // every + 1, B, n T)``; :func:`span_iterates`
    turns them into matrices W.
    """
    X, Y, Z = as_tensor(X, "X"), as_tensor(Y, "Y"), as_tensor(Z, "Z")
    V, W0 = as_tensor(V, "V"), as_tensor(W0, "W0")
    dtype = X.dtype                      # mixed float32/float64 inputs run in the widest of them
    for tensor in (Y, Z, V, W0):
        dtype = torch.promote_types(dtype, tensor.dtype)
    X, Y, Z, V, W0 = (t.to(dtype=dtype, device=X.device) for t in (X, Y, Z, V, W0))
    if X.ndim != 4:
        raise ValueError(f"X must have shape (B, n, T, d), got {tuple(X.shape)}")
    B, n, T, d = X.shape
    expected = {"Y": (Y, (B, n)), "Z": (Z, (B, n, d)), "W0": (W0, (B, d, d))}
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")
    if V.ndim != 3 or tuple(V.shape[:2]) != (B, d):
        raise ValueError(f"V must have shape (B, d, k) = ({B}, {d}, k), got {tuple(V.shape)}")
    if not bool(((Y == 1) | (Y == -1)).all()):
        raise ValueError("labels Y must be -1 or +1")
    steps, every = check_count(steps, "steps"), check_count(every, "every", 1)
    chunk = check_count(chunk, "chunk", 1)
    lr, eps = check_positive(lr, "lr"), check_positive(eps, "eps", allow_zero=True)
    if not all(t.numel() for t in (X, V)):
        raise ValueError(f"X {tuple(X.shape)} and V {tuple(V.shape)} need every dimension >= 1")
    k, nT = V.shape[-1], n * T
    out = torch.empty(steps // every + 1, B, nT, dtype=dtype, device=X.device)
    for lo in range(0, B, chunk):
        hi = min(B, lo + chunk)
        out[:, lo:hi] = _chunk(X[lo:hi], Y[lo:hi], Z[lo:hi], V[lo:hi], W0[lo:hi], steps, lr, eps,
                               every, k)
    if not bool(torch.isfinite(out).all()):
        raise ValueError("normalized GD produced NaN/inf coefficients: the data are too large or "
                         "too small for float64 (tokens, queries or W0 of ~1e150 or more); rescale")
    return out


def _chunk(x, y, z, V, W0, steps: int, lr: float, eps: float, every: int, k: int) -> torch.Tensor:
    b, n, T, _ = x.shape
    nT, dtype = n * T, x.dtype
    a0 = torch.einsum("bntd,bde,bne->ntb", x, W0, z).reshape(nT, b).contiguous()
    K = (torch.einsum("bntd,bmsd->ntmsb", x, x)
         * torch.einsum("bnd,bmd->nmb", z, z)[:, None, :, None]).reshape(nT, nT, b).contiguous()
    XV = torch.einsum("bntd,bdk->ntkb", x, V).contiguous()                 # V_j^T x_it
    if not (bool(torch.isfinite(a0).all()) and bool(torch.isfinite(K).all())
            and bool(torch.isfinite(XV).all())):
        raise ValueError("the logits x^T W0 z, the Gram matrix (x^T x')(z^T z') or the head's "
                         "V^T x overflow float64: tokens, queries, V or W0 are too large (~1e150 or "
                         "more); rescale them")
    y = y.T.contiguous()
    neg_y, y_scaled = -y, y * (-1.0 / n)     # exact (y = +-1): the same digits as sigmoid(-y f) y (-1/n)
    dev = x.device                       # every buffer on the inputs' device (CPU or CUDA)
    like = {"dtype": dtype, "device": dev}
    kept = torch.empty(steps // every + 1, b, nT, **like)
    state = torch.zeros(2, nT, b, **like)            # beta and the logits, updated together
    update = torch.empty(2, nT, b, **like)           # their steps: delta / max|delta| and K of it
    beta, a, dn, Kd = state[0], state[1], update[0], update[1]
    # preallocated buffers: the step below allocates only the softmax
    bufK, bufX, bufP = (torch.empty(nT, nT, b, **like), torch.empty(n, T, k, b, **like),
                        torch.empty(n, T, T, b, **like))
    hid, gv, c = torch.empty(n, k, b, **like), torch.empty(n, T, b, **like), torch.empty(n, T, b, **like)
    bufM = torch.empty(nT, b, **like)
    f, lprime = torch.empty(n, b, **like), torch.empty(n, b, **like)
    top, safe, norm, tiny = (torch.empty(b, **like) for _ in range(4))
    pos = torch.empty(b, dtype=torch.bool, device=dev)
    one, zero = torch.ones((), **like), torch.zeros((), **like)
    for step in range(steps + 1):
        if step % every == 0:
            kept[step // every] = beta.T
            torch.mul(K, beta, out=bufK)                     # exact logits, refreshed
            torch.sum(bufK, 1, out=a)
            a += a0
        if step == steps:
            break
        s = torch.softmax(a.view(n, T, b), dim=1)
        torch.mul(s[:, :, None], XV, out=bufX)
        torch.sum(bufX, 1, out=hid)                          # V_j^T r_i
        hid.clamp_(min=0)
        torch.sum(hid, 1, out=f)                             # h(r_i)
        hid.sign_()                                          # ReLU'(V_j^T r_i)
        torch.mul(hid[:, None], XV, out=bufX)
        torch.sum(bufX, 2, out=gv)                           # g_it = dh / ds_it
        torch.sub(gv[:, :, None, :], gv[:, None, :, :], out=bufP)
        bufP *= s[:, None, :, :]
        torch.sum(bufP, 2, out=c)                            # sum_tau s_tau (g_t - g_tau)
        torch.mul(neg_y, f, out=lprime)
        lprime.sigmoid_().mul_(y_scaled)
        delta = c.mul_(s).mul_(lprime[:, None]).view(nT, b)
        torch.abs(delta, out=bufM)
        torch.amax(bufM, 0, out=top)                         # scale first: no underflow
        torch.gt(top, 0, out=pos)
        torch.where(pos, top, one, out=safe)
        torch.div(delta, safe, out=dn)
        torch.mul(K, dn, out=bufK)
        torch.sum(bufK, 1, out=Kd)
        torch.mul(Kd, dn, out=bufM)
        torch.sum(bufM, 0, out=norm)
        norm.clamp_min_(0).sqrt_()
        torch.reciprocal(safe, out=tiny)                     # eps / safe, as torch computes it
        tiny.mul_(eps)
        coef = norm.add_(tiny).reciprocal_().mul_(lr)        # lr / (...), as torch computes it
        if eps == 0:
            torch.where(pos, coef, zero, out=coef)
        state.sub_(update.mul_(coef))                        # beta moves; the logits follow
    return kept


def span_iterates(beta, X, Z, W0) -> torch.Tensor:
    """``W = W0 + sum_it beta_it x_it z_i^T`` for coefficients ``beta (..., B, n T)`` (the output of
    :func:`ngd_relu_head`) with ``X (B, n, T, d)``, ``Z (B, n, d)``, ``W0 (B, d, d)``."""
    beta, X, Z, W0 = (as_tensor(v, name) for name, v in (("beta", beta), ("X", X), ("Z", Z), ("W0", W0)))
    if X.ndim != 4 or not X.numel():
        raise ValueError(f"X must have shape (B, n, T, d) with every dimension >= 1, got "
                         f"{tuple(X.shape)}")
    B, n, T, d = X.shape
    if tuple(Z.shape) != (B, n, d) or tuple(W0.shape) != (B, d, d):
        raise ValueError(f"Z must have shape (B, n, d) = {(B, n, d)} and W0 (B, d, d) = {(B, d, d)}, "
                         f"got {tuple(Z.shape)} and {tuple(W0.shape)}")
    if beta.ndim < 2 or beta.shape[-1] != n * T or beta.shape[-2] != B:
        raise ValueError(f"beta must end with (B, n T) = ({B}, {n * T}), got "
                         f"{tuple(beta.shape)}")
    dtype = torch.promote_types(torch.promote_types(beta.dtype, X.dtype), torch.promote_types(Z.dtype, W0.dtype))
    beta, X, Z, W0 = (t.to(dtype) for t in (beta, X, Z, W0))
    W = W0 + torch.einsum("...bnt,bntd,bne->...bde", beta.reshape(*beta.shape[:-1], n, T), X, Z)
    if not bool(torch.isfinite(W).all()):
        raise ValueError("W overflows float64: beta, X or Z are too large (~1e150 or more)")
    return W
