"""Gradient descent and normalized GD (attnsvm.train): the step taken against autograd and finite
differences, batched runs against looped runs, the history, determinism, divergence and bad input.
"""

import math
import warnings

import pytest
import torch

import attnsvm as A

F64 = torch.float64


def rand(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def autograd_grads(att, problem, head=None, loss="logistic", stable=True):
    return torch.autograd.grad(A.empirical_risk(att, problem, head, loss, stable).sum(),
                               att.params + (head.params if head else []))


def fd_grads(att, problem, loss="logistic", h=1e-6):
    out = []
    for p in att.params:
        fd = torch.zeros_like(p)
        flat = p.data.view(-1)
        for k in range(flat.numel()):
            old = float(flat[k])
            with torch.no_grad():
                flat[k] = old + h
                up = float(A.empirical_risk(att, problem, loss=loss).sum())
                flat[k] = old - h
                down = float(A.empirical_risk(att, problem, loss=loss).sum())
                flat[k] = old
            fd.view(-1)[k] = (up - down) / (2 * h)
        out.append(fd)
    return out


def gd_step(att, problem, **kw):
    """The gradient train() uses: one GD step with lr = 1 is theta_0 - grad."""
    before = [p.detach().clone() for p in att.params]
    A.train(att, problem, steps=1, lr=1.0, method="gd", **kw)
    return [b - p.detach() for b, p in zip(before, att.params)]


def rel(a, b):
    return float((a - b).norm() / b.norm())


def make(kind, trials=None, seed=0, d=4, scale=1.0):
    lead = () if trials is None else (trials,)
    if kind == "W":
        return A.WAttention(rand(*lead, d, d, seed=seed, scale=scale))
    if kind == "KQ":
        return A.KQAttention(rand(*lead, d, 3, seed=seed, scale=scale),
                             rand(*lead, d, 3, seed=seed + 1, scale=scale))
    if kind == "p":
        return A.PromptAttention(rand(*lead, d, seed=seed, scale=scale))
    return A.PromptAttention(rand(*lead, d, seed=seed, scale=scale), key_matrix=rand(d, d, seed=99))


# --- the gradient train() uses --------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["W", "KQ", "p", "p_keyed"])
@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_train_gradient_matches_autograd_and_finite_differences(kind, loss):
    problem = A.random_problem(5, 4, 4, trials=2, generator=A.set_seed(1))
    att = make(kind, trials=2, seed=2, scale=1.5)
    reference = autograd_grads(att, problem, loss=loss)
    fd = fd_grads(att, problem, loss=loss)
    for g, r, f in zip(gd_step(att, problem, loss=loss), reference, fd):
        assert rel(g, r) < 1e-10
        assert rel(f, r) < 1e-6
        assert float(r.norm()) > 1e-3


@pytest.mark.parametrize("kind", ["W", "KQ", "p"])
def test_train_gradient_accurate_under_saturation(kind):
    """Logit gaps of tens to hundreds, gradients ~1e-15 to 1e-40: the normalized step train() takes
    (lr = 1) points along the re-centred autograd gradient to 1e-8 in every trial and block."""
    problem = A.random_problem(5, 4, 4, trials=2, generator=A.set_seed(3))
    att = make(kind, trials=2, seed=4, scale=1.0)
    with torch.no_grad():
        for p in att.params:
            p.mul_(15.0 if kind == "KQ" else 200.0)
    logits = att.logits(problem).detach()
    top2 = logits.topk(2, dim=-1).values
    assert float((top2[..., 0] - top2[..., 1]).median()) > 30
    reference = autograd_grads(att, problem)
    before = [p.detach().clone() for p in att.params]
    A.train(att, problem, steps=1, lr=1.0)
    for b, p, r in zip(before, att.params, reference):
        step = (b - p.detach()).flatten(1)
        unit = r.flatten(1) / r.flatten(1).norm(dim=-1, keepdim=True)
        assert float(r.flatten(1).norm(dim=-1).min()) < 1e-12      # deep in saturation
        assert float((step - unit).norm(dim=-1).max()) < 1e-8


def test_train_gradient_with_trainable_v_and_mlp_head():
    problem = A.random_problem(5, 4, 4, generator=A.set_seed(5))
    att, head = make("W", seed=6), A.LinearHead(rand(4, seed=7))
    reference = autograd_grads(att, problem, head)
    before = [p.detach().clone() for p in att.params + head.params]
    A.train(att, problem, steps=1, lr=1.0, method="gd", head=head)
    for b, p, r in zip(before, att.params + head.params, reference):
        assert rel(b - p.detach(), r) < 1e-10
    mlp = A.MLPHead(rand(4, 6, seed=8) / 5)
    att = make("KQ", seed=9)
    reference = autograd_grads(att, problem, mlp)
    for g, r in zip(gd_step(att, problem, head=mlp), reference):
        assert rel(g, r) < 1e-10


def test_textbook_and_recentred_training_agree_before_saturation():
    problem = A.random_problem(6, 8, 10, trials=3, generator=A.set_seed(10))
    h = [A.train(A.WAttention.zeros(10, trials=3), problem, 30, stable=s) for s in (True, False)]
    assert torch.allclose(h[0].loss, h[1].loss, rtol=1e-10, atol=0)
    assert torch.allclose(h[0].norm, h[1].norm, rtol=1e-10, atol=1e-12)


# --- the update rules -----------------------------------------------------------------------------

def test_ngd_step_has_length_lr_per_block_and_trial():
    problem = A.random_problem(5, 4, 4, trials=3, generator=A.set_seed(11))
    att = make("KQ", trials=3, seed=12)
    before = [p.detach().clone() for p in att.params]
    grads = autograd_grads(att, problem)
    A.train(att, problem, steps=1, lr=0.3)
    for b, p, g in zip(before, att.params, grads):
        step = b - p.detach()
        assert torch.allclose(step.flatten(1).norm(dim=-1), torch.full((3,), 0.3, dtype=F64), rtol=1e-12)
        assert torch.allclose(A.corr(step, g, 1), torch.ones(3, dtype=F64), rtol=1e-12)


def test_kq_paper_init_first_step_moves_only_q():
    """Q(0) = 0 makes dL/dK = 0: the normalized step of K is 0 (not 0/0), Q moves by lr."""
    problem = A.random_problem(6, 8, 10, trials=2, generator=A.set_seed(13))
    att = A.KQAttention.init(10, trials=2, generator=A.set_seed(14))
    K0 = att.K.detach().clone()
    A.train(att, problem, steps=1, lr=0.1)
    assert torch.equal(att.K.detach(), K0)
    assert torch.allclose(att.Q.detach().flatten(1).norm(dim=-1), torch.full((2,), 0.1, dtype=F64))


def test_eps_and_ridge_safeguards():
    problem = A.random_problem(5, 4, 4, trials=2, generator=A.set_seed(15))
    att = make("W", trials=2, seed=16)
    W0 = att.W.detach().clone()
    (g,) = autograd_grads(att, problem)
    A.train(att, problem, steps=1, lr=0.1, eps=1.0)          # g / (||g|| + eps)
    gnorm = g.flatten(1).norm(dim=-1)[:, None, None]
    assert torch.allclose(W0 - att.W.detach(), 0.1 * g / (gnorm + 1.0), rtol=1e-12, atol=1e-15)
    att = make("W", trials=2, seed=16)
    A.train(att, problem, steps=1, lr=0.1, method="gd", ridge=0.25)   # grad of L + ridge ||W||^2
    assert torch.allclose(W0 - att.W.detach(), 0.1 * (g + 0.5 * W0), rtol=1e-12, atol=1e-15)


# --- the history --------------------------------------------------------------------------------

def test_history_rows_match_recomputed_quantities():
    problem = A.random_problem(4, 5, 6, trials=3, generator=A.set_seed(17))
    reference = rand(3, 6, 6, seed=18)
    att = A.KQAttention.init(6, trials=3, generator=A.set_seed(19))
    h = A.train(att, problem, steps=20, log_every=7, reference=reference, record_iterates=True)
    assert h.steps.tolist() == [0, 7, 14, 20]
    assert h.loss.shape == h.norm.shape == h.corr.shape == h.max_prob.shape == (4, 3)
    assert h.iterates.shape == (4, 3, 6, 6)
    assert torch.equal(h.iterates[-1], att.combined())
    for row, W in enumerate(h.iterates):
        w_att = A.WAttention(W)
        assert torch.allclose(h.loss[row], A.empirical_risk(w_att, problem).detach(), rtol=1e-10)
        assert torch.allclose(h.norm[row], W.flatten(1).norm(dim=-1), rtol=1e-12)
        assert torch.allclose(h.corr[row].nan_to_num(0.0),
                              A.corr(W, reference, 1).nan_to_num(0.0), rtol=1e-12)
        probs = w_att.probabilities(problem)
        assert torch.allclose(h.max_prob[row], A.max_probability(probs), rtol=1e-12)
    assert torch.isnan(h.corr[0]).all()                       # K Q^T = 0 at step 0: no direction
    assert torch.isnan(A.train(make("W", 3, d=6), problem, 2).corr).all()   # no reference given
    assert A.train(make("W", 3, d=6), problem, 5).iterates is None


def test_callback_called_on_logged_steps():
    problem = A.random_problem(4, 5, 6, generator=A.set_seed(20))
    seen = []
    A.train(A.WAttention.zeros(6), problem, 10, log_every=4, callback=lambda s, a: seen.append(s))
    assert seen == [0, 4, 8, 10]
    h = A.train(A.WAttention.zeros(6), problem, 0)
    assert h.steps.tolist() == [0] and float(h.norm[0]) == 0.0


# --- batched runs == looped runs; determinism --------------------------------------------------------

def _histories_equal(batched, runs, tol=1e-12):
    for name in ("loss", "norm", "corr", "max_prob", "iterates"):
        b = getattr(batched, name)
        looped = torch.stack([getattr(r, name) for r in runs], dim=1)
        assert b.shape == looped.shape, name
        assert torch.allclose(b, looped, rtol=tol, atol=tol, equal_nan=True), name


@pytest.mark.parametrize("kind", ["W", "KQ", "p"])
def test_batched_equals_looped(kind):
    problem = A.random_problem(6, 8, 10, trials=5, generator=A.set_seed(21))
    reference = rand(5, 10, 10, seed=22) if kind != "p" else rand(5, 10, seed=22)
    kw = dict(steps=60, reference=reference, record_iterates=True, log_every=3)
    if kind == "KQ":
        kw.update(eps=2.2e-16, ridge=2.2e-16)
    if kind == "W":
        start = A.WAttention.zeros(10, trials=5)
    elif kind == "KQ":
        start = A.KQAttention.init(10, trials=5, generator=A.set_seed(23))
    else:
        start = A.PromptAttention(rand(5, 10, seed=24, scale=0.01))
    initial = [p.detach().clone() for p in start.params]
    batched = A.train(start, problem, **kw)
    runs = []
    for b in range(5):
        if kind == "W":
            single = A.WAttention(initial[0][b])
        elif kind == "KQ":
            single = A.KQAttention(initial[0][b], initial[1][b])
        else:
            single = A.PromptAttention(initial[0][b])
        runs.append(A.train(single, problem.trial(b), **{**kw, "reference": reference[b]}))
    _histories_equal(batched, runs)


def test_batched_equals_looped_mlp_head_autograd_path():
    problem = A.random_problem(3, 4, 6, trials=4, generator=A.set_seed(25))
    V = rand(4, 6, 5, seed=26)
    batched = A.train(A.WAttention.zeros(6, trials=4), problem, 40, head=A.MLPHead(V),
                      record_iterates=True)
    runs = [A.train(A.WAttention.zeros(6), problem.trial(b), 40, head=A.MLPHead(V[b]),
                    record_iterates=True) for b in range(4)]
    _histories_equal(batched, runs)


def test_training_deterministic_under_seed():
    def run():
        g = A.set_seed(31)
        problem = A.random_problem(6, 8, 10, trials=4, generator=g)
        att = A.KQAttention.init(10, trials=4, generator=g)
        return A.train(att, problem, 50, record_iterates=True, eps=2.2e-16, ridge=2.2e-16)
    a, b = run(), run()
    for name in ("loss", "norm", "max_prob", "iterates"):
        assert torch.equal(getattr(a, name), getattr(b, name))


# --- the theory, in small: paper A figure 1 (A1) -------------------------------------------------------

def test_a1_directions_follow_their_svm():
    """A1 at 2000 steps: W -> Frobenius Att-SVM (paper: 0.9997), (K, Q) with the authors'
    safeguards -> nuclear Att-SVM (paper: 1.0000)."""
    problem = A.figure_problem("A1", generator=A.set_seed(1))
    fro = A.att_svm(problem.X, problem.Z, problem.opt, norm="fro")
    nuc = A.att_svm(problem.X, problem.Z, problem.opt, norm="nuc")
    assert fro.rank == 2 and nuc.rank == 1
    h = A.train(A.WAttention.zeros(2), problem, 2000, reference=fro.W)
    assert float(h.corr[-1]) >= 0.999
    assert float(h.max_prob[-1]) > 0.999
    kq = A.KQAttention.init(2, generator=A.set_seed(1))
    h = A.train(kq, problem, 2000, reference=nuc.W, eps=2.2e-16, ridge=2.2e-16)
    assert float(h.corr[-1]) >= 0.999


# --- divergence and bad input -----------------------------------------------------------------------

def test_training_error_on_divergence():
    """GD with a huge step on the exponential loss with a trainable head: Y v^T r -> -inf for some
    example, the loss overflows."""
    problem = A.random_problem(4, 5, 6, trials=2, generator=A.set_seed(32))
    with pytest.raises(A.TrainingError, match="the loss became NaN/inf at step 1; lower lr"):
        A.train(A.WAttention.zeros(6, trials=2), problem, 5, lr=1e6, method="gd",
                loss="exponential", head=A.LinearHead(problem.v.clone()))
    assert issubclass(A.TrainingError, ValueError)


def test_training_error_on_injected_nan():
    problem = A.random_problem(4, 5, 6, trials=2, generator=A.set_seed(33))

    def poison(step, att):
        if step == 3:
            with torch.no_grad():
                att.params[0][1, 0, 0] = float("nan")

    with pytest.raises(A.TrainingError, match="NaN/inf at step 4"):
        A.train(A.WAttention.zeros(6, trials=2), problem, 10, callback=poison)
    with pytest.raises(A.TrainingError, match="NaN/inf"):
        A.train(A.KQAttention.init(6, trials=2), problem, 10, callback=poison)


def test_train_bad_arguments():
    problem = A.random_problem(4, 5, 6, trials=2, generator=A.set_seed(34))
    att = A.WAttention.zeros(6, trials=2)
    with pytest.raises(ValueError, match="method must be one of 'gd', 'ngd', 'polyak', 'mirror', 'spectral', 'sign', got 'adam'"):
        A.train(att, problem, 2, method="adam")
    for kw, message in ((dict(lr=0.0), "lr must be a finite number in"),
                        (dict(lr=-1.0), "lr must be a finite number in"),
                        (dict(steps=-1), "steps must be at least 0"),
                        (dict(log_every=0), "log_every must be at least 1"),
                        (dict(max_step=0.0), "max_step must be a finite number in"),
                        (dict(max_step=float("nan")), "max_step must be a finite number in"),
                        (dict(method="polyak", stable=False), "the Polyak step needs"),
                        (dict(method="polyak", head=A.MLPHead(torch.ones(6, 3, dtype=torch.float64))),
                         "the Polyak step needs")):
        with pytest.raises(ValueError, match=message):
            A.train(att, problem, **{"steps": 2, **kw})
    with pytest.raises(ValueError, match="act on dimension 5, the tokens have d=6"):
        A.train(A.WAttention.zeros(5, trials=2), problem, 2)


def test_train_unknown_loss_is_value_error():
    problem = A.random_problem(4, 5, 6, trials=2, generator=A.set_seed(35))
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        A.train(A.WAttention.zeros(6, trials=2), problem, 2, loss="hinge")


def test_train_mismatched_trial_dims_is_value_error():
    problem = A.random_problem(4, 5, 6, trials=5, generator=A.set_seed(36))
    with pytest.raises(ValueError, match=r"trials shape \(3,\) and the problem \(5,\)"):
        A.train(A.WAttention.zeros(6, trials=3), problem, 2)


@pytest.mark.parametrize("case", ["linear head v", "MLP head V", "reference"])
def test_train_wrong_head_or_reference_shape_is_value_error(case):
    problem = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(37))
    kw = {"linear head v": dict(head=A.LinearHead(rand(4, seed=1))),
          "MLP head V": dict(head=A.MLPHead(rand(4, 3, seed=2))),
          "reference": dict(reference=rand(4, 4, seed=3))}[case]
    with pytest.raises(ValueError):
        A.train(A.WAttention.zeros(5, trials=2), problem, 2, **kw)


# --- devices -------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_training_matches_cpu():
    problem = A.random_problem(6, 8, 10, trials=4, generator=A.set_seed(37))
    reference = rand(4, 10, 10, seed=38)
    out = {}
    for device in ("cpu", "cuda"):
        att = A.KQAttention.init(10, trials=4, generator=A.set_seed(39), device=device)
        h = A.train(att, problem.to(device), 50, reference=reference.to(device),
                    record_iterates=True)
        out[device] = h
        assert h.iterates.device.type == device
    for name in ("loss", "norm", "corr", "iterates"):
        assert torch.allclose(getattr(out["cuda"], name).cpu(), getattr(out["cpu"], name),
                              rtol=1e-10, atol=1e-10, equal_nan=True)


def test_history_tells_a_settled_direction_from_a_moving_one():
    """`turn` is the angle the direction moved between logged steps; `unsettled(tol)` flags the
    runs still turning by more than tol radians per step at the end."""
    problem = A.random_problem(6, 8, 10, trials=4, generator=A.set_seed(3))
    att = A.WAttention.zeros(10, trials=4)
    h = A.train(att, problem, 2000, log_every=100)
    assert h.turn.shape == (21, 4)
    assert torch.isnan(h.turn[:2]).all()               # no previous step; W(0) = 0 has no direction
    assert (h.turn[2:] >= 0).all() and (h.turn[-1] < h.turn[2]).all()       # slows down
    assert not h.unsettled(1e-3).any() and h.unsettled(1e-12).all()
    short = A.train(A.WAttention.zeros(10, trials=4), problem, 20, log_every=10)
    assert short.unsettled(1e-3).all()
    with pytest.raises(ValueError, match="two logged steps"):
        A.train(A.WAttention.zeros(10, trials=4), problem, 0).unsettled(1e-3)


def test_direction_angle_is_accurate_for_tiny_angles():
    from attnsvm.model._train_log import direction_angle
    a = torch.tensor([1.0, 0.0], dtype=torch.float64)
    for angle in (1e-3, 1e-8, 1e-12):
        b = torch.tensor([math.cos(angle), math.sin(angle)], dtype=torch.float64) * 1e200
        assert math.isclose(float(direction_angle(a, b, 0)), angle, rel_tol=1e-9)
    assert torch.isnan(direction_angle(a, torch.zeros(2, dtype=torch.float64), 0))


def test_polyak_step_matches_hand_computation():
    """One Polyak step: W1 = W0 - (L(W0) - L*) / ||g||^2 g, with L* the risk on opt."""
    problem = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(61))
    W0 = torch.randn(2, 5, 5, generator=A.set_seed(62), dtype=torch.float64)
    model = A.WAttention(W0.clone())
    risk = A.empirical_risk(model, problem)
    (grad,) = torch.autograd.grad(risk.sum(), model.W)
    excess = risk.detach() - A.model.optimal_risk(problem)
    expected = W0 - (0.5 * excess / grad.flatten(1).square().sum(-1)).reshape(2, 1, 1) * grad
    att = A.WAttention(W0.clone())
    h = A.train(att, problem, 1, 0.5, "polyak")
    assert torch.allclose(att.W, expected, rtol=1e-10, atol=1e-12)
    assert torch.allclose(h.step[0], (expected - W0).flatten(1).norm(dim=-1), rtol=1e-10)
    assert torch.isnan(h.step[-1]).all()


def test_polyak_stops_where_the_gradient_underflows():
    """Along a global run the Polyak step grows ||W|| by about ||W_mm|| per step, so the logit
    gaps pass ~745 and the gradient underflows in float64: from there the step is exactly 0."""
    problem = A.random_problem(2, 3, 4, generator=A.set_seed(63))
    with pytest.warns(A.FrozenWarning, match="1 of 1 trial"):
        h = A.train(A.WAttention.zeros(4), problem, 2000, 1.0, "polyak", log_every=100)
    assert float(h.max_prob[-1]) == 1.0
    assert float(h.step[1]) > 0.5 and float(h.step[-2]) == 0.0
    assert float(h.norm[-1]) == float(h.norm[-2])
    assert 0 < int(h.frozen) < 2000 and bool(h.unsettled(1e-4))


def test_max_step_caps_every_method():
    problem = A.random_problem(3, 4, 5, trials=3, generator=A.set_seed(64))
    for method, lr in (("gd", 100.0), ("ngd", 5.0), ("polyak", 50.0)):
        h = A.train(A.WAttention.zeros(5, 3), problem, 20, lr, method, max_step=0.25)
        assert (h.step[:-1] <= 0.25 * (1 + 1e-12)).all()
        assert (h.step[:-1] > 0.2).any()


def test_mirror_descent_dual_norm_step():
    """dual_norm=True: the dual-space step lr * g / ||g||_q (q = p / (p - 1)), by hand on one step."""
    problem = A.random_problem(2, 3, 3, generator=A.set_seed(2))
    p, lr = 1.5, 0.1
    start = torch.full((3, 3), 0.2, dtype=torch.float64)
    att = A.WAttention(start.clone())
    risk = A.empirical_risk(att, problem)
    (g,) = torch.autograd.grad(risk, att.params[0])
    q = p / (p - 1)
    u = start.sign() * start.abs() ** (p - 1) - lr * g / g.abs().pow(q).sum() ** (1 / q)
    expected = u.sign() * u.abs() ** (1 / (p - 1))
    A.train(att, problem, 1, lr, "mirror", p=p, dual_norm=True)
    assert torch.allclose(att.W.detach(), expected, atol=1e-14)
    with pytest.raises(ValueError, match="mirror descent only"):
        A.train(A.WAttention.zeros(3), problem, 1, lr, "ngd", dual_norm=True)
    with pytest.raises(TypeError):
        A.train(A.WAttention.zeros(3), problem, 1, lr, "mirror", p=p, dual_norm="yes")


def test_block_normalize_is_bitwise_the_flattened_formula():
    """The normalized step reduces a block in row-major order, as the formula on the flattened
    block does, for contiguous and transposed gradients (autograd returns transposed ones)."""
    g = torch.Generator().manual_seed(8)
    for shape, core in (((6, 10, 10), 2), ((10, 10), 2), ((3, 4, 20, 7), 2), ((5, 9), 1)):
        grad = torch.randn(*shape, generator=g, dtype=torch.float64) * 1e-150
        grad[0].zero_()
        for x in (grad, grad.transpose(-1, -2)):
            flat = x.flatten(x.ndim - core)
            top = flat.abs().amax(-1, keepdim=True)
            safe = torch.where(top > 0, top, torch.ones_like(top))
            expected = torch.where(top > 0, (flat / safe) / (flat / safe).norm(dim=-1, keepdim=True),
                                   torch.zeros_like(flat)).reshape(x.shape)
            assert torch.equal(A.model.block_normalize(x, core), expected)


@pytest.mark.parametrize("trials", [None, 3])
def test_history_rows_are_bitwise_the_per_step_measurements(trials):
    """The recorder measures logged steps in blocks (of 64): each row must be exactly what
    measuring that step alone gives (norm, correlation, turn), across block boundaries."""
    from attnsvm.model.metrics import correlation
    from attnsvm.model._train_log import direction_angle, row_norm
    problem = A.random_problem(5, 4, 4, trials=trials, generator=A.set_seed(3))
    lead = () if trials is None else (trials,)
    reference = rand(*lead, 4, 4, seed=7)
    att = A.KQAttention.init(4, trials=trials, generator=A.set_seed(4))
    h = A.train(att, problem, 150, 0.3, log_every=1, reference=reference, record_iterates=True)
    depth = len(lead)

    def same(a, b):                     # bitwise, NaN equal to NaN
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])
    for k in range(len(h.steps)):
        W = h.iterates[k]
        assert same(h.norm[k], row_norm(W.flatten(depth)))
        assert same(h.corr[k], correlation(W, reference, depth))
        if k:
            assert same(h.turn[k], direction_angle(W, h.iterates[k - 1], depth))
    assert torch.isnan(h.turn[0]).all() and float(h.turn[-1].max()) > 0


def test_block_normalize_keeps_autograd():
    # the training loop divides in place; a caller that differentiates gets a graph that works
    g = torch.randn(3, 2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: A.model.block_normalize(x, 2), (g,))
    with torch.no_grad():
        assert torch.equal(A.model.block_normalize(g, 2), A.model.block_normalize(g.detach(), 2))


def test_a_frozen_run_is_recorded_warned_and_not_settled():
    """Exact (K, Q) NGD at step 0.1 reaches ||K Q^T|| ~ 3,400 and from step ~730 on every update is
    exactly 0 (the gradient underflows in float64): `frozen` says from when, a FrozenWarning says
    so, and `unsettled` does not read the zero turn as a converged direction. The step at which the
    gradient underflows depends on the last bits of the arithmetic (729 under one BLAS kernel, 730
    under another), so it is read from the run and only its range is fixed."""
    problem = A.random_problem(6, 8, 10, generator=A.set_seed(0))
    with pytest.warns(A.FrozenWarning, match=r"froze: every update was exactly 0 from step (\d+) on") as caught:
        h = A.train(A.KQAttention.init(10, generator=A.set_seed(0)), problem, 2000, 0.1,
                    record_iterates=True)
    assert h.frozen.shape == ()
    first = int(h.frozen)
    assert 650 <= first <= 800, first
    assert f"from step {first} on" in str(caught[0].message)
    assert (h.step[first:-1] == 0).all() and h.step[first - 1] > 0
    assert torch.equal(h.iterates[first], h.iterates[-1])
    assert not torch.equal(h.iterates[first - 1], h.iterates[first])
    assert float(h.turn[-1]) == 0.0 and bool(h.unsettled(1e-4))
    # logged every 7 steps: the first logged step with a zero update
    with pytest.warns(A.FrozenWarning):
        sparse = A.train(A.KQAttention.init(10, generator=A.set_seed(0)), problem, 2000, 0.1, log_every=7)
    assert int(sparse.frozen) == -(-first // 7) * 7
    # logged at the ends only: the last update is measured too, so the freeze is still seen
    with pytest.warns(A.FrozenWarning):
        ends = A.train(A.KQAttention.init(10, generator=A.set_seed(0)), problem, 2000, 0.1, log_every=2000)
    assert int(ends.frozen) == 1999 and bool(ends.unsettled(1e-4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = A.train(A.KQAttention.init(10, generator=A.set_seed(0)), problem, 2000, 0.1, warn=False)
    assert int(quiet.frozen) == first


def test_frozen_is_per_trial_and_absent_from_moving_runs():
    problem = A.random_problem(6, 8, 10, trials=3, generator=A.set_seed(0))
    with pytest.warns(A.FrozenWarning, match="of 3 trial"):
        h = A.train(A.KQAttention.init(10, trials=3, generator=A.set_seed(0)), problem, 2500, 0.1)
    for b in range(3):                  # the first step of the final run of zero updates, or -1
        zero = (h.step[:-1, b] == 0).tolist()
        first = len(zero) - next((k for k, z in enumerate(reversed(zero)) if not z), len(zero))
        assert int(h.frozen[b]) == (first if first < len(zero) else -1)
    assert (h.frozen >= 0).any()
    assert torch.equal(h.unsettled(1e-4), ~(h.turn[-1] <= 1e-4) | (h.frozen >= 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # W moves for ever: no warning
        moving = A.train(A.WAttention.zeros(10, trials=3), problem, 300)
    assert (moving.frozen == -1).all()
    assert (A.train(A.WAttention.zeros(10, trials=3), problem, 0).frozen == -1).all()


def test_a_frozen_attention_is_flagged_while_a_trained_head_still_moves():
    """Joint training (a trainable head): the attention's W stops moving exactly (float32, linear
    loss) while v keeps moving; the freeze is the attention's, so it is recorded and warned, and
    the direction is not reported as settled."""
    problem = A.random_problem(6, 4, 4, trials=2, generator=torch.Generator().manual_seed(3),
                               dtype=torch.float32)
    att, head, Ws = A.WAttention(torch.zeros(2, 4, 4, dtype=torch.float32)), A.LinearHead(problem.v.clone()), []
    v0 = head.params[0].detach().clone()
    with pytest.warns(A.FrozenWarning):
        h = A.train(att, problem, 3000, 1.0, log_every=100, head=head, loss="linear",
                    callback=lambda step, a: Ws.append(a.combined().clone()))
    assert bool((Ws[-1] == Ws[-21]).all())                    # W did not move in 2000 steps
    assert not torch.equal(head.params[0].detach(), v0)       # the head did
    assert (h.frozen >= 0).all() and bool(h.unsettled(1e-6).all())


@pytest.mark.parametrize("method", ["gd", "ngd", "polyak", "mirror", "spectral", "sign"])
def test_a_batched_model_trains_on_an_unbatched_problem(method):
    """Parameters with trials on a problem without: every trial trains on the problem, exactly as
    on its copies (repeat_instance), and as each trial trained alone (to rounding)."""
    problem = A.random_problem(4, 3, 5, generator=A.set_seed(81))
    W0 = rand(3, 5, 5, seed=82, scale=0.3)
    kw = dict(steps=40, lr=0.1, method=method, record_iterates=True, reference=rand(5, 5, seed=83),
              max_step=1.0 if method == "polyak" else None)
    att, copies = A.WAttention(W0), A.WAttention(W0)
    h = A.train(att, problem, **kw)
    h_copies = A.train(copies, A.studies.repeat_instance(problem, 3), **kw)
    assert torch.equal(att.W, copies.W)
    for name in ("loss", "norm", "corr", "turn", "step", "iterates", "frozen"):
        assert torch.equal(getattr(h, name).nan_to_num(7.0), getattr(h_copies, name).nan_to_num(7.0)), name
    alone = [A.train(A.WAttention(W0[b]), problem, **kw) for b in range(3)]
    _histories_equal(h, alone)
    kq = A.KQAttention.init(5, trials=2, generator=A.set_seed(84))
    kq_copies = A.KQAttention.init(5, trials=2, generator=A.set_seed(84))
    if method != "polyak":
        A.train(kq, problem, 30, 0.1, method)
        A.train(kq_copies, A.studies.repeat_instance(problem, 2), 30, 0.1, method)
        assert torch.equal(kq.combined(), kq_copies.combined())


def test_a_model_shared_by_trials_is_refused():
    """One W on a problem with 3 trials would descend the sum of the 3 risks (GD with 3 times the
    step): refused, saying to give the model the trials; so is a trained head shared by trials."""
    problem = A.random_problem(4, 3, 5, trials=3, generator=A.set_seed(85))
    for att in (A.WAttention.zeros(5), A.KQAttention.init(5, generator=A.set_seed(86))):
        with pytest.raises(ValueError, match=r"one set of parameters per trial: .* trials shape \(\) "
                                             r"and the problem \(3,\).*sum of their losses"):
            A.train(att, problem, 5)
    with pytest.raises(ValueError, match=r"head's v has trials shape \(\) and the run \(3,\)"):
        A.train(A.WAttention.zeros(5, trials=3), problem, 5, head=A.LinearHead(problem.v[0]))
    with pytest.raises(ValueError, match=r"head's v has trials shape \(2,\) and the run \(\)"):
        A.train(A.WAttention.zeros(5), problem.trial(0), 5, head=A.LinearHead(problem.v[:2]))
    A.train(A.WAttention.zeros(5, trials=3), problem, 5, head=A.LinearHead(problem.v))   # per trial
