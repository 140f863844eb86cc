"""A primal-dual interior-point method for the nuclear-norm max-margin problem (Att-SVM*).

The problem ``min ||W||_* s.t. <F_k, W> >= 1`` (``W`` of size ``p x q``, ``m`` constraints) and its
dual ``max 1^T lam s.t. lam >= 0, ||sum_k lam_k F_k||_op <= 1`` are one semidefinite program in
standard dual form: with ``S(lam) = sum_k lam_k F_k``,

    max 1^T lam   s.t.   Z = [[I, S(lam)], [S(lam)^T, I]] >= 0 (PSD),   z = lam >= 0,

whose primal variable ``X`` ((p + q) x (p + q), PSD) carries the solution ``W = -2 X_12`` (the
off-diagonal block; ``tr X >= ||W||_*`` with equality at the optimum). A general conic solver
factorizes a system in the ``(p + q)(p + q + 1) / 2`` entries of the PSD cone at every iteration;
here the system is the ``m x m`` Schur complement (``m <= 70`` in the book), and because each
constraint feature is rank one (``F_k = u_k v_k^T``) it is a sum of Hadamard products of small
Gram matrices: an iteration costs a few small dense products, and many instances of the same size
are solved together, one batched torch operation per step for all of them.

The method: the HKM search direction with Mehrotra's predictor-corrector (Helmberg, Rendl,
Vanderbei and Wolkowicz 1996; Kojima, Shindoh and Hara 1997; Monteiro 1997; as in Todd, Toh and
Tütüncü, "On the Nesterov-Todd direction in semidefinite programming", SIAM J. Optim. 1998, and
SDPT3), started dual-feasible from ``lam = c 1``. An answer is returned only with a certificate
(:func:`certified_nuclear_svms`): a primal point and a dual point, each made exactly feasible by a
scaling, whose objectives agree to ``GAP_TOL``. Otherwise that instance gets None, and the caller
falls back to a general solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_ITERATIONS = 60
CHECK_FROM = 1e-8         # certificates are evaluated once the iteration's relative gap is below this
STOP_GAP = 1e-11          # ... and an instance stops when its certificate's gap is below this
GAP_TOL = 1e-9            # a certificate is accepted with a relative gap up to this


@dataclass(frozen=True)
class NuclearCertificate:
    """``W`` (``p x q``) and multipliers ``lam`` (``m``) with ``<F_k, W> >= 1`` and
    ``lam >= 0``, ``||sum_k lam_k F_k||_op <= 1`` (both made exact by a scaling): by weak duality
    the optimum lies in ``[bound, value]``, ``value = ||W||_*``, ``bound = 1^T lam``, and
    ``gap = (value - bound) / value``."""

    W: torch.Tensor
    lam: torch.Tensor
    value: float
    bound: float
    gap: float
    iterations: int


def _inverse_factors(V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``L^-1`` of the Cholesky factors ``V = L L^T`` of a batch, and which ``V`` are definite."""
    L, info = torch.linalg.cholesky_ex(V)
    ok = info == 0
    L = torch.where(ok[:, None, None], L, torch.eye(V.shape[-1], dtype=V.dtype))
    return torch.linalg.solve_triangular(L, torch.eye(V.shape[-1], dtype=V.dtype).expand_as(L),
                                         upper=False), ok


def _max_step(inverse_factor: torch.Tensor, dV: torch.Tensor) -> torch.Tensor:
    """Largest ``a`` (per instance) with ``V + a dV >= 0``, from ``L^-1`` of ``V = L L^T``."""
    low = torch.linalg.eigvalsh(torch.nan_to_num(inverse_factor @ dV @ inverse_factor.mT))[:, 0]
    return torch.where(low < 0, -1.0 / low, torch.inf)


def _lp_step(v: torch.Tensor, dv: torch.Tensor) -> torch.Tensor:
    """Largest ``a`` (per instance) with ``v + a dv >= 0`` for ``v > 0``."""
    ratio = torch.where(dv < 0, -v / dv, torch.inf)
    return ratio.min(dim=1).values


def _schur_complement(U, V, X, Zi, p: int) -> torch.Tensor:
    """``M_kl = tr(A_k X A_l Z^-1)`` for ``A_k = -[[0, F_k], [F_k^T, 0]]`` and rank-one
    ``F_k = u_k v_k^T``: with ``Y = Z^-1`` the blocks give ``<F_k, Y11 F_l X22 + X11 F_l Y22 +
    Y12 F_l^T X12 + X12 F_l^T Y12>``, i.e. Hadamard products of ``m x m`` Gram matrices."""
    X11, X12, X22 = X[:, :p, :p], X[:, :p, p:], X[:, p:, p:]
    Y11, Y12, Y22 = Zi[:, :p, :p], Zi[:, :p, p:], Zi[:, p:, p:]
    UY12V, UX12V = U @ Y12 @ V.mT, U @ X12 @ V.mT
    return ((U @ Y11 @ U.mT) * (V @ X22 @ V.mT) + (U @ X11 @ U.mT) * (V @ Y22 @ V.mT)
            + UY12V * UX12V.mT + UX12V * UY12V.mT)


def _certify(U, V, W, lam):
    """Per instance: ``W`` divided by its smallest margin (feasible), ``lam`` clipped at 0 and
    divided by ``||S(lam)||_op`` (dual feasible), their objectives and the relative gap (inf where
    either scaling is impossible, or where the gap is negative beyond rounding)."""
    margin = ((U @ W) * V).sum(dim=-1).min(dim=1).values
    lam = lam.clamp(min=0.0)
    spectral = torch.linalg.matrix_norm((U * lam[..., None]).mT @ V, ord=2)
    ok = (margin > 0) & (spectral > 0)
    W = W / torch.where(ok, margin, 1.0)[:, None, None]
    lam = lam / torch.where(ok, spectral, 1.0)[:, None]
    value, bound = torch.linalg.svdvals(W).sum(dim=1), lam.sum(dim=1)
    gap = (value - bound) / value
    # weak duality makes the gap >= 0 up to rounding; a negative one would be an error: refused
    gap = torch.where(ok & (gap >= -1e-12), gap, torch.inf)
    return W, lam, value, bound, gap


class _Constraints:
    """The operators of the SDP for a batch: ``A_k = -[[0, F_k], [F_k^T, 0]]`` with
    ``F_k = u_k v_k^T``, so that ``Z = I - adjoint(lam)`` and ``<A_k, X> = forward(X)_k``."""

    def __init__(self, U: torch.Tensor, V: torch.Tensor):
        self.U, self.V = U, V
        (self.B, self.m, self.p), self.q = U.shape, V.shape[2]

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:           # sum_k y_k A_k
        p, s = self.p, self.p + self.q
        S, out = (self.U * y[..., None]).mT @ self.V, torch.zeros(self.B, s, s, dtype=torch.float64)
        out[:, :p, p:], out[:, p:, :p] = -S, -S.mT
        return out

    def forward(self, Q: torch.Tensor) -> torch.Tensor:           # (<A_k, Q>)_k = -2 u_k^T Q_12 v_k
        return -2 * ((self.U @ Q[:, :self.p, self.p:]) * self.V).sum(dim=-1)


def _iterate(ops: _Constraints, best: dict[str, torch.Tensor]) -> None:
    """The predictor-corrector iteration from ``X = I, x = 1`` and the dual-feasible
    ``lam = 1 / (2 ||S(1)||_op)``; records in ``best`` each instance's best certificate (gap, W,
    lam, iteration). An instance stops at a gap below ``STOP_GAP`` or when ``X``, ``Z`` or the Schur
    complement is no longer numerically definite."""
    B, m, p, s = ops.B, ops.m, ops.p, ops.p + ops.q
    eye = torch.eye(s, dtype=torch.float64).expand(B, s, s)
    top = torch.linalg.matrix_norm(ops.U.mT @ ops.V, ord=2)
    y = (0.5 / torch.where(top > 0, top, 1.0))[:, None].expand(B, m).clone()
    Z, z = eye - ops.adjoint(y), y.clone()
    X, x = eye.clone(), torch.ones(B, m, dtype=torch.float64)
    active = torch.ones(B, dtype=torch.bool)
    for iteration in range(1, MAX_ITERATIONS + 1):
        mu = ((X * Z).sum(dim=(1, 2)) + (x * z).sum(dim=1)) / (s + m)
        rp = 1.0 - ops.forward(X) + x              # b - A(X) - A_lp(x), with b = 1, A_lp = -I
        Rd = eye - Z - ops.adjoint(y)              # C - Z - A^*(y), C = I
        rd = y - z                                 # 0 - z - A_lp^*(y)
        primal, dual = X.diagonal(dim1=1, dim2=2).sum(dim=1), y.sum(dim=1)
        check = active & ((primal - dual).abs() <= CHECK_FROM * (1 + dual.abs()))
        if bool(check.any()):
            W, lam, _, _, gap = _certify(ops.U, ops.V, -2 * X[:, :p, p:], y)
            better = check & (gap < best["gap"])
            best["gap"] = torch.where(better, gap, best["gap"])
            best["W"] = torch.where(better[:, None, None], W, best["W"])
            best["lam"] = torch.where(better[:, None], lam, best["lam"])
            best["iteration"] = torch.where(better, iteration, best["iteration"])
            active &= ~(best["gap"] <= STOP_GAP)
        LXi, okX = _inverse_factors(X)
        LZi, okZ = _inverse_factors(Z)
        Zi = LZi.mT @ LZi
        M = _schur_complement(ops.U, ops.V, X, Zi, p)
        M = (M + M.mT) / 2 + torch.diag_embed(x / z)
        LM, info = torch.linalg.cholesky_ex(M)
        active &= okX & okZ & (info == 0)
        if not bool(active.any()):
            return
        LM = torch.where((info == 0)[:, None, None], LM, torch.eye(m, dtype=torch.float64))

        def direction(sigma_mu, corr_X, corr_x):
            # Newton on X Z = sigma mu I - corr_X, x z = sigma mu - corr_x (HKM), dy first
            base_X = sigma_mu[:, None, None] * Zi - X - corr_X @ Zi
            base_x = (sigma_mu[:, None] - corr_x) / z - x
            GX = base_X - X @ Rd @ Zi
            h = (rp - ops.forward((GX + GX.mT) / 2) + base_x - x * rd / z)[..., None]
            dy = torch.cholesky_solve(h, LM)
            dy = (dy + torch.cholesky_solve(h - M @ dy, LM))[..., 0]       # one refinement
            dZ, dz = Rd - ops.adjoint(dy), rd + dy
            dX = base_X - X @ dZ @ Zi
            return (dX + dX.mT) / 2, base_x - x * dz / z, dy, dZ, dz

        def steps(dX, dx, dZ, dz, fraction):
            ap = torch.minimum(_max_step(LXi, dX), _lp_step(x, dx))
            ad = torch.minimum(_max_step(LZi, dZ), _lp_step(z, dz))
            ap, ad = (fraction * ap).clamp(max=1.0), (fraction * ad).clamp(max=1.0)
            usable = active & torch.isfinite(ap) & torch.isfinite(ad)
            return torch.where(usable, ap, 0.0), torch.where(usable, ad, 0.0)

        dX, dx, dy, dZ, dz = direction(torch.zeros_like(mu), torch.zeros_like(X), torch.zeros_like(x))
        ap, ad = steps(dX, dx, dZ, dz, 1.0)                                        # predictor
        mu_aff = (((X + ap[:, None, None] * dX) * (Z + ad[:, None, None] * dZ)).sum(dim=(1, 2))
                  + ((x + ap[:, None] * dx) * (z + ad[:, None] * dz)).sum(dim=1)) / (s + m)
        sigma = (mu_aff / mu).clamp(max=1.0) ** 3
        dX, dx, dy, dZ, dz = direction(sigma * mu, dX @ dZ, dx * dz)
        ap, ad = steps(dX, dx, dZ, dz, 0.98)                                       # corrector
        X = X + ap[:, None, None] * torch.nan_to_num(dX)
        x = x + ap[:, None] * torch.nan_to_num(dx)
        y, z = y + ad[:, None] * torch.nan_to_num(dy), z + ad[:, None] * torch.nan_to_num(dz)
        Z = Z + ad[:, None, None] * torch.nan_to_num(dZ)
        X, Z = (X + X.mT) / 2, (Z + Z.mT) / 2


def certified_nuclear_svms(U: torch.Tensor, V: torch.Tensor) -> list[NuclearCertificate | None]:
    """Solve ``min ||W||_* s.t. u_k^T W v_k >= 1 (k = 1..m)`` for a batch of instances given by
    ``U (B, m, p)`` and ``V (B, m, q)`` (the constraint features ``F_k = u_k v_k^T`` of Att-SVM* are
    rank one: ``u_k`` a token difference, ``v_k`` its query); each instance gets its certificate, or
    None where the iteration failed or the certificate's relative gap exceeds ``GAP_TOL`` (solve
    that one otherwise).

    The certificate bounds the objective, not ``W`` itself nor its rank: where the solution set
    holds more than one matrix, ``W`` is the interior-point method's (near the analytic centre of
    the optimal face). The method is not scale-invariant: it expects data whose solution has norm
    ~1 (``att_svms`` rescales by the least-norm point first); far from that scale, or with
    duplicated constraints (a singular Schur complement), it returns None. A step that breaks down
    numerically stops the iteration for the whole batch, keeping the certificates found so far.
    """
    U, V = torch.as_tensor(U, dtype=torch.float64), torch.as_tensor(V, dtype=torch.float64)
    if (U.ndim != 3 or V.ndim != 3 or U.shape[:2] != V.shape[:2] or 0 in U.shape or 0 in V.shape
            or not bool(torch.isfinite(U).all() and torch.isfinite(V).all())):
        raise ValueError(f"U (B, m, p) and V (B, m, q) must be finite, non-empty and agree in B and "
                         f"m; got shapes {tuple(U.shape)} and {tuple(V.shape)}")
    ops = _Constraints(U, V)
    best = {"gap": torch.full((ops.B,), torch.inf, dtype=torch.float64),
            "W": torch.zeros(ops.B, ops.p, ops.q, dtype=torch.float64),
            "lam": torch.zeros(ops.B, ops.m, dtype=torch.float64),
            "iteration": torch.zeros(ops.B, dtype=torch.long)}
    try:
        _iterate(ops, best)
    except torch.linalg.LinAlgError:          # a numerically broken step: the certificates so far stand
        pass
    W, lam, value, bound, gap = _certify(U, V, best["W"], best["lam"])
    return [NuclearCertificate(W=W[b], lam=lam[b], value=float(value[b]), bound=float(bound[b]),
                               gap=float(gap[b]), iterations=int(best["iteration"][b]))
            if float(best["gap"][b]) <= GAP_TOL else None for b in range(ops.B)]
