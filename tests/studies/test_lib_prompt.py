"""Prompt attention (attnsvm.studies.prompt, attnsvm.studies.prompt_joint) against independent computations: the
paper-B instances against the chapter's stated tables and their hand-solved SVMs, the curve
diagnostics against loops, the B4 offset against a direct minimization of the loss."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

import attnsvm as A

F64, F32 = torch.float64, torch.float32
KEY = A.studies.B_KEY_MATRIX


def test_b1_instance_and_its_svms_by_hand():
    for third, local in ((0.9, False), (0.0, True)):
        P = A.studies.b1_problem(third)
        assert P.X.tolist() == [[[-0.1, 1.0, 1.0], [1.0, 0.0, 0.9], [0.0, 0.0, third]]]
        assert P.Y.tolist() == [1.0] and P.v.tolist() == [0.0, 0.0, 1.0] and P.X.dtype == F64
        keys = P.X @ KEY
        glob, loc = A.p_svm(keys, [0]), A.p_svm(keys, [1])
        # token 3's constraint alone: least-norm point (-0.1, 1)/1.01, which meets token 2's (1.11/1.01)
        assert torch.allclose(glob.W, torch.tensor([-0.1, 1.0, 0.0], dtype=F64) / 1.01, atol=1e-9)
        assert torch.allclose(loc.W, torch.tensor([1.0, 0.0, 0.0], dtype=F64), atol=1e-9)
        assert glob.support[0].tolist() == [False, False, True]
        assert bool(A.is_locally_optimal(P, [1], loc).all()) == local    # 0.9 > 0, but 0.9 = 0.9 ties
    assert A.studies.b1_problem(0.9).X[0, 2, 2].item() == 0.9                    # no float32 detour
    assert A.studies.b1_problem(0.0, dtype=F32).X.dtype == F32


def test_b2_instance_is_the_authors_draw_plus_centres():
    P = A.studies.b2_problem(0)
    noise = (0.2 * torch.randn(3, 7, 3, generator=torch.Generator().manual_seed(0))).to(F64)
    centres = torch.tensor([[1.0, 0.0]] + [[-1.0, 1.0]] * 3 + [[-0.5, -0.5]] * 3, dtype=F64)
    assert torch.equal(P.X[..., :2], noise[..., :2] + centres)
    assert P.X[:, 0, 2].tolist() == [1.0] * 3 and bool((P.X[:, 1:, 2] == 0.5).all())
    assert bool((P.opt == 0).all())
    assert not torch.equal(A.studies.b2_problem(1).X, P.X) and torch.equal(A.studies.b2_problem(0).X, P.X)
    assert A.studies.b2_problem(3, n=2, T=5).X.shape == (2, 5, 3)


def test_b3_instances_and_their_svms_by_hand():
    for third, pmm, prelax, S in (([0.5, 1.0], [4 / 3, 1 / 3], [4 / 3, 1 / 3], [True] * 3),
                                  ([0.5, 1.5], [1.25, 0.25], [1.0, 0.0], [True, True, False])):
        P = A.studies.b3_problem(third)
        assert P.X.tolist() == [[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], third]]
        assert P.Y.tolist() == [1, -1, 1]
        vs = A.maxmargin.v_svm(P.X, P.Y, [1, 1, 1])
        assert torch.allclose(vs.W, torch.tensor([0.0, 1.0], dtype=F64), atol=1e-9)
        assert vs.support[:, 0].tolist() == S
        assert torch.allclose(A.p_svm(P.X, [1, 1, 1]).W, torch.tensor(pmm, dtype=F64), atol=1e-9)
        got = A.maxmargin.relaxed_p_svm(P.X, [1, 1, 1], vs.support[:, 0]).W
        assert torch.allclose(got, torch.tensor(prelax, dtype=F64), atol=1e-9)


def test_b4_family():
    P = A.studies.b4_problem([1.0, 2.0, 100.0])
    assert P.X.shape == (3, 2, 2, 3) and P.X[2].tolist() == [[[0, 0, 0], [1, 1, 100]], [[0, 0, 0], [1, -1, 1]]]
    assert bool((P.opt == 1).all())
    for j in range(3):
        assert torch.allclose(A.p_svm(P.X[j] @ KEY, [1, 1]).W, torch.tensor([1.0, 0, 0], dtype=F64), atol=1e-9)


def test_selected_probability_against_a_loop():
    P = A.studies.b2_problem(2)
    prompts = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(1), dtype=F64) * 3
    s = A.studies.selected_probability(prompts, P, [0, 2, 6], KEY)
    assert s.shape == (4, 5, 3)
    for a in range(4):
        for b in range(5):
            for i, t in enumerate([0, 2, 6]):
                logits = torch.tensor([float(P.X[i, u, :2] @ prompts[a, b, :2]) for u in range(7)], dtype=F64)
                assert math.isclose(float(s[a, b, i]), float(torch.softmax(logits, 0)[t]), rel_tol=1e-12)
    # without a key matrix the keys are the tokens; float32 prompts compute in float32
    P3 = A.studies.b3_problem([0.5, 1.5])
    assert torch.allclose(A.studies.selected_probability(torch.tensor([2.0, 0.0]), P3, 1),
                          torch.sigmoid(torch.tensor([2.0, 2.0, 1.0])), atol=1e-7)
    assert A.studies.selected_probability(torch.tensor([2.0, 0.0]), P3, 1).dtype == F32


def test_first_crossing_and_first_departure():
    curve = torch.tensor([0.1, 0.5, 0.99, 0.98, 1.0], dtype=F64)
    assert A.studies.first_crossing(curve, 0.99) == 2 and A.studies.first_crossing(curve, 1.0) == 4
    assert A.studies.first_crossing(curve, 1.5) is None
    ref = torch.ones(5, dtype=F64)
    assert A.studies.first_departure(ref - torch.tensor([0, 5e-4, 2e-3, 0, 0]), ref) == 2
    assert A.studies.first_departure(ref + 1.0, ref) is None                       # one-sided: above is fine
    assert A.studies.first_departure(ref - 5e-4, ref, tol=1e-4) == 0


def test_saturation_onset_against_a_step_by_step_loop():
    P = A.studies.b1_problem(0.0, dtype=F32)
    att = A.PromptAttention(torch.tensor([0.0, -1.0, 0.0], dtype=F32), key_matrix=KEY.to(F32))
    its = A.train(att, P, steps=300, lr=0.1, method="ngd", record_iterates=True).iterates
    loop = None
    for k in range(len(its)):                 # one softmax per step, token 2 selected
        s = torch.softmax((P.X[0] @ KEY.to(F32)) @ its[k], -1)
        if s[1].item() == 1.0:
            loop = k
            break
    onset = A.studies.saturation_onset(its, P, [1], KEY)
    assert onset is not None and onset == loop
    # prediction from the logit gaps: each small term e^-gap added to 1 in float32 rounds away once
    # it is at most half the spacing above 1, 2^-24, i.e. once the smallest gap reaches 24 log 2
    p = its.double()
    smallest_gap = torch.minimum(p[:, 0], 1.1 * p[:, 0] - p[:, 1])       # against tokens 3 and 1
    predicted = int((smallest_gap >= 24 * math.log(2)).nonzero()[0])
    assert abs(predicted - onset) <= 1
    mass = torch.exp(-p[:, 0]) + torch.exp(-(1.1 * p[:, 0] - p[:, 1]))
    assert float(mass[onset]) > 2.0 ** -24          # the total neglected mass is not the criterion
    # in float64 the same iterates never round to 1 (the gap would need ~37)
    assert A.studies.saturation_onset(its.double(), P.to(dtype=F64), [1], KEY) is None


def _autograd_logit_gradient(p, problem, dtype):
    """d(output)/d(logits) of the textbook softmax by autograd in ``dtype`` (B1: output = s^T nu)."""
    X = problem.X[0].to(dtype)
    logits = ((X @ KEY.to(dtype)) @ p.to(dtype)).clone().requires_grad_(True)
    nu = X @ problem.v.to(dtype)
    return torch.autograd.grad((torch.softmax(logits, -1) * nu).sum(), logits)[0]


def test_selected_term_error_against_autograd_and_exact_sums():
    P = A.studies.b1_problem(0.0)
    for p1 in (2.0, 8.0, 14.0, 15.5, 16.0, 16.3, 17.0, 19.0):
        p = torch.tensor([p1, 0.0, 0.0], dtype=F32).double()        # representable in float32
        # exact selected term, token 2 selected, by an explicit loop in float64 (no cancellation)
        s = torch.softmax((P.X[0] @ KEY) @ p, -1).tolist()
        nu = P.X[0, :, 2].tolist()
        exact = s[1] * sum(s[t] * (nu[1] - nu[t]) for t in range(3))
        auto32 = float(_autograd_logit_gradient(p, P, F32)[1])
        err32 = float(A.studies.selected_term_error(p.float()[None], P.to(dtype=F32), [1], KEY)[0, 0])
        assert math.isclose(err32, abs(auto32 - exact) / abs(exact), rel_tol=1e-6, abs_tol=1e-6), (p1, err32)
        err64 = float(A.studies.selected_term_error(p[None], P, [1], KEY)[0, 0])
        assert err64 < 2.0 ** -50 * math.exp(p1)     # float64: relative error ~ u / (1 - s_alpha), still small
    # small gaps: float32 is accurate; past 24 log 2 the term is lost entirely (computed exactly 0)
    small = A.studies.selected_term_error(torch.tensor([[2.0, 0.0, 0.0]]), P.to(dtype=F32), [1], KEY)
    lost = A.studies.selected_term_error(torch.tensor([[17.0, 0.0, 0.0]]), P.to(dtype=F32), [1], KEY)
    assert float(small) < 1e-5 and float(lost) == 1.0
    # the loss is gradual: on a ray of rising p_1 the error passes 0.5 before s_alpha rounds to 1
    ray = torch.zeros(200, 3, dtype=F32)
    ray[:, 0] = torch.linspace(12.0, 18.0, 200)
    err = A.studies.selected_term_error(ray, P.to(dtype=F32), [1], KEY)[:, 0]
    onset = A.studies.saturation_onset(ray, P.to(dtype=F32), [1], KEY)
    half = A.studies.first_crossing(err, 0.5)
    assert half is not None and onset is not None and half < onset
    assert float(ray[half, 0]) < 24 * math.log(2) - 0.5 < float(ray[onset, 0])


def test_selected_term_error_with_heads_and_degenerate_terms():
    P = A.studies.b3_problem([0.5, 1.5])
    prompts = torch.tensor([[1.0, 0.5], [3.0, -1.0]], dtype=F64)
    default = A.studies.selected_term_error(prompts, P, [1, 1, 1])
    same = A.studies.selected_term_error(prompts, P, [1, 1, 1], heads=P.v.expand(2, 2))
    assert torch.equal(default, same) and default.shape == (2, 3)
    # another head, float32: against autograd row by row and the exact term by a loop in float64
    heads = torch.tensor([[0.3, 0.7], [-1.0, 2.0]], dtype=F32).double()      # representable in float32
    got = A.studies.selected_term_error(prompts.float(), P.to(dtype=F32), [1, 1, 1], heads=heads.float())
    for k in range(2):
        for i in range(3):
            s = torch.softmax(P.X[i] @ prompts[k], 0).tolist()
            nu = (P.X[i] @ heads[k]).tolist()
            exact = s[1] * sum(s[t] * (nu[1] - nu[t]) for t in range(2))
            logits = (P.X[i].float() @ prompts[k].float()).requires_grad_(True)
            computed = float(torch.autograd.grad((torch.softmax(logits, 0) * (P.X[i].float() @ heads[k].float())).sum(),
                                                 logits)[0][1])
            assert math.isclose(float(got[k, i]), abs(computed - exact) / abs(exact), rel_tol=1e-9, abs_tol=1e-12)
    # equal values: the exact term is 0; error 0 when the computed one is 0 as well
    flat = A.Problem(torch.tensor([[[1.0, 0.0, 2.0], [0.0, 1.0, 2.0]]], dtype=F64), torch.ones(1, dtype=F64),
                     torch.ones(1, 3, dtype=F64), torch.tensor([0.0, 0.0, 1.0], dtype=F64))
    assert float(A.studies.selected_term_error(torch.zeros(1, 3, dtype=F64), flat, [0], KEY)) == 0.0    # s = (1/2, 1/2)
    # ... and inf when rounding leaves a nonzero computed term (never a finite made-up ratio)
    assert float(A.studies.selected_term_error(torch.tensor([[0.3, 0.1, 0.0]], dtype=F64), flat, [0], KEY)) in (0.0, math.inf)


def test_log_growth_rate():
    k = torch.arange(1001, dtype=F64)
    norms = 2.5 * torch.log(k.clamp_min(1)) + 7.0
    assert math.isclose(float(A.studies.log_growth_rate(norms, 100, 300)), 2.5, rel_tol=1e-12)
    linear = 0.1 * k
    ratio = A.studies.log_growth_rate(linear, 300, 1000) / A.studies.log_growth_rate(linear, 100, 300)
    assert math.isclose(float(ratio), 700 / 200 * math.log(3) / math.log(10 / 3), rel_tol=1e-12)
    batched = torch.stack([norms, linear], 1)
    assert A.studies.log_growth_rate(batched, 10, 20).shape == (2,)


def _b4_excess(p2: float, p1: float, C: float, loss: str) -> float:
    """e^{p1} (L(p1, p2) - L(inf)), stable: s = 1 - sigma(-a) with a = p1 +- p2."""
    def term(u_full: float, a: float) -> float:          # ell(u_full (1 - sigma(-a))) - ell(u_full)
        x = u_full / (1 + math.exp(a))                    # u_full * sigma(-a)
        if loss == "linear":
            return x
        if loss == "exponential":
            return math.exp(-u_full) * math.expm1(x)
        return math.log1p(math.exp(-u_full) * math.expm1(x) / (1 + math.exp(-u_full)))
    return math.exp(p1) * (term(C, p1 + p2) + term(1.0, p1 - p2)) / 2


@pytest.mark.parametrize("loss", A.studies.OFFSET_LOSSES)
@pytest.mark.parametrize("C", [1.0, 1.3, 2.0, 5.0, 10.0])
def test_b4_offset_against_a_direct_minimization(C, loss):
    p1 = 20.0
    best = minimize_scalar(_b4_excess, bounds=(-8, 8), args=(p1, C, loss), method="bounded",
                           options={"xatol": 1e-10})
    assert abs(best.x - A.studies.b4_offset(C, loss)) < 1e-5
    # a formula off by 1e-3 would fail
    assert abs(best.x - (A.studies.b4_offset(C, loss) + 1e-3)) > 5e-4


def test_b4_offset_closed_forms_and_turns():
    assert A.studies.b4_offset(7.0, "linear") == math.log(7.0) / 2
    assert math.isclose(A.studies.b4_offset(7.0, "exponential"), (math.log(7) - 6) / 2, rel_tol=1e-14)
    assert A.studies.b4_offset(1.0) == 0.0 and A.studies.b4_offset(1.3) > 0 > A.studies.b4_offset(2.0)
    big = A.studies.b4_offset(1000.0)                             # no overflow; about -(C - log C - 1.31)/2
    assert math.isclose(big, -(1000 - math.log(1000) - 1 - math.log1p(math.exp(-1))) / 2, rel_tol=1e-12)
    c_max, c_0 = A.studies.logistic_offset_turns()
    assert abs(c_max - 1.2785) < 1e-3 and abs(c_0 - 1.597) < 1e-3
    assert abs(A.studies.b4_offset(c_0)) < 1e-13
    h = 1e-5
    assert abs(A.studies.b4_offset(c_max + h) - A.studies.b4_offset(c_max - h)) < 1e-10     # f' = 0 there
    assert A.studies.b4_offset(c_max) > A.studies.b4_offset(c_max - 0.05) and A.studies.b4_offset(c_max) > A.studies.b4_offset(c_max + 0.05)


def test_joint_runs_agree_before_saturation():
    P = A.studies.b3_problem([0.5, 1.5])
    hist, heads = A.studies.joint_ngd(P, [0.0, -1.0], [-1.0, 0.0], 60)
    p_its, v_its = A.studies.authors_joint_ngd(P, [0.0, -1.0], [-1.0, 0.0], 60, eps_p=0.0, eps_v=0.0)
    assert hist.iterates.shape == p_its.shape == (61, 2) and heads.shape == v_its.shape == (61, 2)
    assert torch.allclose(hist.iterates, p_its, atol=1e-10)
    assert torch.allclose(heads, v_its, atol=1e-10)
    # one step by hand: normalized steps of length 0.1 on each block
    assert math.isclose(float((p_its[1] - p_its[0]).norm()), 0.1, rel_tol=1e-12)
    assert math.isclose(float((v_its[1] - v_its[0]).norm()), 0.1, rel_tol=1e-12)


def test_label_probability_against_a_loop():
    P = A.studies.b3_problem([0.5, 1.0])
    g = torch.Generator().manual_seed(3)
    prompts, heads = torch.randn(6, 2, generator=g, dtype=F64), torch.randn(6, 2, generator=g, dtype=F64)
    got = A.studies.label_probability(prompts, heads, P)
    for k in range(6):
        vals = []
        for i in range(3):
            r = P.X[i].T @ torch.softmax(P.X[i] @ prompts[k], 0)
            vals.append(1 / (1 + math.exp(-float(P.Y[i]) * float(heads[k] @ r))))
        assert math.isclose(float(got[k]), sum(vals) / 3, rel_tol=1e-12)


def test_mixed_label_margin_against_a_grid_of_directions():
    rng = np.random.default_rng(5)
    angles = np.linspace(0, 2 * np.pi, 200001)
    dirs = np.stack([np.cos(angles), np.sin(angles)], 1)
    for _ in range(5):
        R = torch.tensor(rng.normal(size=(3, 2)) + [0.0, 2.0], dtype=F64)
        Y = torch.tensor([1.0, 1.0, 1.0], dtype=F64)
        margin, bounded = A.studies.mixed_label_margin(R, Y)
        brute = float((dirs @ (Y[:, None] * R).numpy().T).min(1).max())
        assert not bounded
        if brute > 0:          # the grid can only under-estimate, by at most max ||r|| times its spacing
            assert -1e-9 <= margin - brute <= float(R.norm(dim=1).max()) * 2 * np.pi / 200000
        else:
            assert margin == 0.0
    # features too small for float64 to decide (the review's reproducer): the bound min ||r_i||
    P = A.studies.b3_problem([0.5, 1.5])
    s = torch.sigmoid(P.X[:, 1] @ torch.tensor([-9.474, -12.572], dtype=F64))
    assert float(s.min()) < 1e-9
    margin, bounded = A.studies.mixed_label_margin(s[:, None] * P.X[:, 1], P.Y)
    assert bounded and margin == pytest.approx(float((s[:, None] * P.X[:, 1]).norm(dim=1).min()), rel=1e-12)
    # not separable through the origin: margin 0
    assert A.studies.mixed_label_margin(torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([1.0, -1.0])) == (0.0, False)
    # the B3 mixed features at a prompt: r_i = s_i x_i2
    P = A.studies.b3_problem([0.5, 1.5])
    s = A.studies.selected_probability(torch.tensor([3.0, 0.0], dtype=F64), P, 1)
    margin, _ = A.studies.mixed_label_margin(s[:, None] * P.X[:, 1], P.Y)
    brute = float((dirs @ (P.Y[:, None] * s[:, None] * P.X[:, 1]).numpy().T).min(1).max())
    assert -1e-9 <= margin - brute <= 2 * np.pi / 200000 * 2
