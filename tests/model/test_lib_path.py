"""The regularization path (attnsvm.model.path): Theorems 1 and 2 on the A1 geometry, the cone-restricted
(local) path, the ball constraint, and bad input."""

import pytest
import torch

import attnsvm as A

F64 = torch.float64
RADII = torch.logspace(0, 3, 7, dtype=F64)          # 1 ... 1e3


@pytest.fixture(scope="module")
def a1():
    problem = A.figure_problem("A1", generator=A.set_seed(1))
    fro = A.att_svm(problem.X, problem.Z, problem.opt, norm="fro")
    nuc = A.att_svm(problem.X, problem.Z, problem.opt, norm="nuc")
    return problem, fro, nuc


def test_w_path_converges_to_frobenius_svm(a1):
    """Theorem 1: W_R / R -> W_mm / ||W_mm||_F; corr >= 0.999 at R = 1e3, increasing along the way."""
    problem, fro, nuc = a1
    att = A.WAttention(0.1 * torch.randn(2, 2, generator=A.set_seed(2), dtype=F64))
    path = A.regularization_path(att, problem, RADII, steps=100)
    assert path.iterates.shape == (7, 2, 2) and torch.equal(path.radii, RADII)
    c = A.corr(path.iterates, fro.W, 1)
    assert float(c[-1]) >= 0.999
    assert (c[3:].diff() > 0).all()
    assert float(A.corr(path.iterates[-1], nuc.W)) < float(c[-1]) - 1e-3    # the other SVM is not it
    # the ball constraint binds: ||W_R|| = R, and the loss decreases with R
    assert torch.allclose(path.iterates.flatten(1).norm(dim=-1), RADII, rtol=1e-9)
    assert (path.loss.diff() <= 1e-12).all()
    assert torch.equal(att.combined(), path.iterates[-1])       # the attention is updated in place
    # the loss reported is the loss of the iterate
    final = A.empirical_risk(A.WAttention(path.iterates[-1]), problem).detach()
    assert torch.allclose(path.loss[-1], final)


def test_kq_path_converges_to_nuclear_svm(a1):
    """Theorem 2: K_R Q_R^T / R -> the nuclear-norm Att-SVM solution (rank 1 on A1)."""
    problem, fro, nuc = a1
    kq = A.KQAttention.init(2, generator=A.set_seed(1))
    path = A.regularization_path(kq, problem, RADII, steps=100)
    assert float(A.corr(path.iterates[-1], nuc.W)) >= 0.999
    assert float(A.corr(path.iterates[-1], fro.W)) < 0.999
    # ||K||^2 + ||Q||^2 <= 2R bounds ||K Q^T||_* <= R
    assert (torch.linalg.matrix_norm(path.iterates, "nuc") <= RADII * (1 + 1e-9)).all()
    assert float(torch.linalg.matrix_norm(path.iterates[-1], "nuc")) >= 0.99 * 1e3
    assert int(A.numerical_rank(path.iterates[-1], 1e-3)) == 1


def test_closed_form_and_autograd_paths_agree(a1):
    """With no head the path uses closed-form gradients; an explicit LinearHead() goes through
    autograd. Same iterates."""
    problem, _, _ = a1
    W0 = 0.1 * torch.randn(2, 2, generator=A.set_seed(2), dtype=F64)
    a = A.regularization_path(A.WAttention(W0), problem, RADII[:5], steps=50)
    b = A.regularization_path(A.WAttention(W0), problem, RADII[:5], steps=50, head=A.LinearHead())
    assert torch.allclose(a.iterates, b.iterates, rtol=1e-8, atol=1e-10)


def test_batched_path_equals_per_trial(a1):
    problem, _, _ = a1
    starts = torch.randn(3, 2, 2, generator=A.set_seed(3), dtype=F64)
    stacked = A.Problem.stack([problem] * 3)
    batched = A.regularization_path(A.WAttention(starts), stacked, RADII[:4], steps=50)
    for b in range(3):
        single = A.regularization_path(A.WAttention(starts[b]), problem, RADII[:4], steps=50)
        assert torch.allclose(batched.iterates[:, b], single.iterates, rtol=1e-12, atol=1e-12)
        assert torch.allclose(batched.loss[:, b], single.loss, rtol=1e-12)


def test_cone_path_local_convergence():
    """The cone-restricted path corr(W, W_mm(alpha)) >= 1 - mu (mu = 0.1) stays in the cone, and
    converges to W_mm(alpha) where alpha is locally optimal; where it is not, it stays pinned to
    the cone's boundary. alpha = the tokens 300 NGD steps select on A3-style instances."""
    g = A.set_seed(5)
    problem = A.random_problem(6, 8, 10, trials=8, generator=g)
    att = A.WAttention.zeros(10, trials=8)
    A.train(att, problem, 300)
    alpha = A.selected_tokens(att.probabilities(problem))
    svms = [A.att_svm(problem.trial(b).X, problem.trial(b).Z, alpha[b]) for b in range(8)]
    directions = torch.stack([s.W for s in svms])
    local = torch.tensor([bool(A.is_locally_optimal(problem.trial(b), alpha[b], svms[b]).all())
                          for b in range(8)])
    assert local.any() and not local.all()
    mu = 0.1
    start = A.WAttention(torch.randn(8, 10, 10, generator=g, dtype=F64))
    path = A.regularization_path(start, problem, RADII, steps=300, cone=(directions, mu))
    c = A.corr(path.iterates, directions, 2)                     # (radii, trials)
    assert (c >= 1 - mu - 1e-12).all()
    assert (c[-1][local] >= 0.9999).all()
    assert torch.allclose(c[-1][~local], torch.full_like(c[-1][~local], 1 - mu), atol=1e-9)


def test_path_bad_input(a1):
    problem, fro, _ = a1
    W = A.WAttention(torch.eye(2, dtype=F64))
    for radii in ([1.0, 0.5], [-1.0, 2.0], [0.0, 1.0], [], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="radii must be a non-empty increasing sequence"):
            A.regularization_path(W, problem, radii)
    with pytest.raises(ValueError, match="needs a nonzero starting point"):
        A.regularization_path(A.WAttention.zeros(2), problem, [1.0])
    with pytest.raises(ValueError, match="cone constraint is defined for the W and p"):
        A.regularization_path(A.KQAttention.init(2), problem, [1.0], cone=(fro.W, 0.1))
    for start in (A.WAttention(torch.eye(3, dtype=F64)), A.KQAttention.init(3, m=2)):
        with pytest.raises(ValueError, match="act on dimension 3, the tokens have d=2; build the "
                                             "attention for d=2"):
            A.regularization_path(start, problem, [1.0])       # was torch's "mat1 and mat2 ..."


def test_path_unknown_loss_is_value_error(a1):
    problem, _, _ = a1
    with pytest.raises(ValueError, match="unknown loss"):
        A.regularization_path(A.WAttention(torch.eye(2, dtype=F64)), problem, [1.0], loss="hinge")


@pytest.mark.parametrize("case", ["mu out of range", "direction shape"])
def test_path_bad_cone_is_value_error(a1, case):
    problem, fro, _ = a1
    cone = (fro.W, 3.0) if case == "mu out of range" else (torch.eye(3, dtype=F64), 0.1)
    with pytest.raises(ValueError):
        A.regularization_path(A.WAttention(torch.eye(2, dtype=F64)), problem, [1.0], cone=cone)



def small_margin_instances(count, seed=1):
    """Feasible random instances with small margins (||W_mm||_F in [15, 40]): the hard case."""
    g, found = A.set_seed(seed), []
    while len(found) < count:
        P = A.random_problem(5, 4, 3, generator=g)
        try:
            fro = A.att_svm(P.X, P.Z, P.opt)
        except A.InfeasibleError:
            continue
        if 15 <= fro.objective <= 40:
            found.append((P, fro, A.att_svm(P.X, P.Z, P.opt, norm="nuc")))
    return found


@pytest.fixture(scope="module")
def hard():
    return small_margin_instances(4)


S_HARD = torch.tensor([1.0, 10.0, 50.0, 200.0], dtype=F64)


@pytest.mark.parametrize("index", range(4))
def test_w_path_small_margins_converges(hard, index):
    """With the SVM direction as reference (one more start per radius, and the loss test) the W
    path converges on small-margin instances: residual <= tol, loss <= the scaled SVM
    direction's, the loss never increases along the path, and 1 - corr < 1e-5 at s = 200."""
    P, fro, _ = hard[index]
    start = 1e-2 * torch.randn(3, 3, generator=A.set_seed(10 + index), dtype=F64)
    path = A.regularization_path(A.WAttention(start), P, S_HARD * fro.objective, reference=fro.W)
    assert path.all_converged
    assert (path.tangential <= 1e-4).all()
    assert (path.loss <= path.reference_loss).all()
    assert (path.loss.diff() <= 0).all()
    c = A.corr(path.iterates, fro.W, 1)
    assert 1 - float(c[-1]) < 1e-5 and (c.diff() > 0).all()


def test_w_path_without_reference_can_end_elsewhere_and_the_check_says_so(hard):
    """From a small random start the path of instance 0 stays in another selection's basin
    (corr ~0.3 with W_mm). Its own residual is small, so only a reference reveals it: a path
    started at the same point with the reference as a check-only start loses to it, and the
    path given the reference goes past it."""
    P, fro, _ = hard[0]
    start = 1e-2 * torch.randn(3, 3, generator=A.set_seed(10), dtype=F64)
    radii = S_HARD * fro.objective
    free = A.regularization_path(A.WAttention(start), P, radii)
    assert float(A.corr(free.iterates[-1], fro.W)) < 0.9
    reference_loss = A.empirical_risk(A.WAttention(radii[-1] * fro.W / fro.objective), P)
    assert float(free.loss[-1]) > float(reference_loss)       # not the minimiser of the ball
    guided = A.regularization_path(A.WAttention(start), P, radii, reference=fro.W)
    assert guided.all_converged and float(guided.loss[-1]) <= float(reference_loss)


def test_path_flags_and_warns_when_out_of_steps(hard):
    P, fro, _ = hard[1]
    radii = S_HARD * fro.objective
    start = 1e-2 * torch.randn(3, 3, generator=A.set_seed(3), dtype=F64)
    with pytest.warns(A.PathWarning, match="did not converge"):
        path = A.regularization_path(A.WAttention(start), P, radii, steps=3)
    assert not path.all_converged
    assert torch.equal(path.converged, path.tangential <= 1e-4)


def test_path_never_ends_above_its_start(hard):
    """The issue's case: started on the scaled SVM direction at s = 100, the path must not end
    with a larger loss (the descent test rejects every step that raises it)."""
    for P, fro, nuc in hard:
        R = 100 * fro.objective
        W0 = R * fro.W / fro.objective
        start_loss = float(A.empirical_risk(A.WAttention(W0), P))
        path = A.regularization_path(A.WAttention(W0), P, [R], steps=200, warn=False)
        assert float(path.loss[-1]) <= start_loss
        R = 100 * nuc.objective
        K, Q = A.model._path_setup._reference_start(A.KQAttention.init(3), R * nuc.W / nuc.objective)
        start_loss = float(A.empirical_risk(A.KQAttention(K, Q), P))
        path = A.regularization_path(A.KQAttention(K, Q), P, [R], steps=200, warn=False)
        assert float(path.loss[-1]) <= start_loss


@pytest.mark.parametrize("index", range(4))
def test_kq_path_small_margins_reaches_nuclear_svm(hard, index):
    """(K, Q) with the nuclear SVM as reference: the loss is never above the scaled reference's,
    1 - corr with W_mm_* < 1e-4 at s = 200, and `converged` is exactly the stated criterion."""
    P, _, nuc = hard[index]
    att = A.KQAttention.init(3, generator=A.set_seed(20 + index))
    path = A.regularization_path(att, P, S_HARD[1:] * nuc.objective, reference=nuc.W, tol=1e-3,
                                 warn=False)
    assert (path.loss <= path.reference_loss).all()
    assert 1 - float(A.corr(path.iterates[-1], nuc.W)) < 1e-4
    assert torch.equal(path.converged, path.tangential <= 1e-3)


# --- provenance and random restarts (issue 18, item 4) -------------------------------------------

@pytest.fixture(scope="module")
def basins():
    """n=3, T=3, d=2 (seed 1): opt = (1, 0, 1); (2, 0, 1) and (2, 2, 0) are locally optimal
    selections (wrong basins). Returns the problem and the three SVM directions."""
    P = A.random_problem(3, 3, 2, generator=A.set_seed(1))
    assert P.opt.tolist() == [1, 0, 1]
    svm = {a: A.att_svm(P.X, P.Z, torch.tensor(a)) for a in ((1, 0, 1), (2, 0, 1), (2, 2, 0))}
    for a in ((2, 0, 1), (2, 2, 0)):
        assert bool(A.is_locally_optimal(P, torch.tensor(a), svm[a]).all())
    return P, svm


def test_path_records_which_start_won(a1):
    """Every radius records its winning start (codes 0-2 without restarts), per trial."""
    problem, fro, _ = a1
    starts = torch.randn(3, 2, 2, generator=A.set_seed(3), dtype=F64)
    path = A.regularization_path(A.WAttention(starts), A.Problem.stack([problem] * 3), RADII[:4],
                                 steps=50, reference=fro.W.expand(3, 2, 2), warn=False)
    assert path.start.shape == (4, 3) and path.start.dtype == torch.long
    assert set(path.start.unique().tolist()) <= {0, 1, 2}
    assert path.restarts == 0 and path.restart_loss is None and path.restart_corr is None
    assert A.PathResult.START_NAMES == ("rescaled", "previous", "reference", "restart")
    total = sum(path.won(k).long() for k in A.PathResult.START_NAMES)
    assert bool((total == 1).all())                                 # exactly one kind per entry
    assert torch.equal(path.won("reference"), path.start == 2)
    free = A.regularization_path(A.WAttention(starts[0]), problem, RADII[:3], steps=20, warn=False)
    assert free.start.shape == (3,) and not bool(free.won("reference").any())
    assert str(free.provenance()).startswith("best of up to 2 starts per radius")
    with pytest.raises(ValueError, match="kind must be one of"):
        path.won("random")


def test_reference_in_a_wrong_basin_wins_and_the_provenance_says_so(basins):
    """The issue's trap: given a locally optimal but wrong direction as reference, the path ends
    on it (corr 1 - 1e-6) and `converged` holds at every radius (a certified stationary point),
    so a check 'the path ends near the reference' passes. The provenance shows that the
    reference start won at every radius; random restarts find a lower loss elsewhere."""
    P, svm = basins
    wrong, bad, opt = svm[2, 0, 1].W, svm[2, 2, 0].W, svm[1, 0, 1].W
    radii = torch.tensor([1.0, 3.0, 10.0, 30.0], dtype=F64) * svm[2, 0, 1].objective
    start = 0.5 * bad / bad.norm()
    guided = A.regularization_path(A.WAttention(start), P, radii, steps=60, reference=wrong)
    assert guided.all_converged
    assert 1 - float(A.corr(guided.iterates[-1], wrong)) < 1e-6
    assert float(A.corr(guided.iterates[-1], opt)) < 0                 # not the global direction
    assert bool(guided.won("reference").all())
    summary = guided.provenance()
    assert summary.radii_won("reference") == radii.tolist() and summary.trials_won("reference") == (1, 1)
    assert "the reference won at radii" in str(summary)
    best = A.regularization_path(A.WAttention(start), P, radii, steps=200, reference=wrong,
                                 restarts=4, seed=0, warn=False)
    assert not bool(best.won("reference")[-1]) and bool(best.won("restart").any())
    assert bool(best.converged[-1].all())                  # a certified point, not a budget's end
    assert float(best.loss[-1]) < float(guided.loss[-1])
    assert float(A.corr(best.iterates[-1], opt)) > 0.9999
    assert "random restarts won at radii" in str(best.provenance())


def test_restarts_are_reproducible_under_a_seed(basins):
    P, svm = basins
    radii = torch.tensor([2.0, 6.0, 20.0], dtype=F64)
    start = 0.1 * torch.randn(2, 2, 2, generator=A.set_seed(4), dtype=F64)
    stacked = A.Problem.stack([P, P])

    def run(threads=None, **kw):
        before = torch.get_num_threads()
        try:
            if threads:
                torch.set_num_threads(threads)
            return A.regularization_path(A.WAttention(start), stacked, radii, steps=30, restarts=3,
                                         warn=False, **kw)
        finally:
            torch.set_num_threads(before)

    a, b, c = run(seed=7), run(seed=7, threads=2), run(generator=A.set_seed(7), threads=1)
    for other in (b, c):
        for field in ("iterates", "loss", "tangential", "start", "restart_loss", "restart_corr"):
            assert torch.equal(getattr(a, field), getattr(other, field)), field
    assert a.restart_corr.shape == (3, 3, 2) and a.restart_loss.shape == (3, 3, 2)
    assert int(a.start.max()) <= 2 + 3
    # the winner's own record: where a restart won, its end point is the returned one
    won = a.start >= 3
    for r, t in won.nonzero().tolist():
        j = int(a.start[r, t]) - 3
        assert abs(float(a.restart_corr[r, j, t]) - 1) < 1e-12
        assert float(a.restart_loss[r, j, t]) == float(a.loss[r, t])
    same = a.provenance(corr_tol=1e-3).same_basin
    assert same.shape == (3, 2) and bool((same >= won.long()).all())
    d = run(seed=8)
    assert not torch.equal(a.restart_corr, d.restart_corr)        # another seed, other starts


def test_restarts_zero_is_the_old_path():
    """restarts=0 (the default) computes exactly what the path computed before restarts existed
    (values recorded from that version, W and (K, Q))."""
    g = A.set_seed(11)
    P = A.random_problem(5, 4, 3, trials=2, generator=g)
    W0 = 1e-2 * torch.randn(2, 3, 3, generator=g, dtype=F64)
    ref = torch.randn(2, 3, 3, generator=g, dtype=F64)
    old_loss = [[0.7595629220273551, 0.5772564508785815], [0.5684606221156869, 0.42739463590321636],
                [0.5173785144978246, 0.39371412327208677]]
    old_last = [1.2167499072381616, 0.10344692542237639, -0.3134677276644158]
    for kw in ({}, {"restarts": 0}, {"restarts": 0, "seed": 3}):
        r = A.regularization_path(A.WAttention(W0), P, [1.0, 5.0, 25.0], steps=40, reference=ref,
                                  warn=False, **kw)
        assert torch.allclose(r.loss, torch.tensor(old_loss, dtype=F64), rtol=1e-12, atol=0)
        assert torch.allclose(r.iterates[-1, 0, 0], torch.tensor(old_last, dtype=F64), rtol=1e-10)
    kq = A.KQAttention.init(3, trials=2, generator=A.set_seed(3))
    r2 = A.regularization_path(kq, P, [5.0, 25.0], steps=40, restarts=0, warn=False)
    assert torch.allclose(r2.loss, torch.tensor([[0.5810463861473464, 0.45222560011273005],
                                                 [0.5176224159439373, 0.39476815583002056]],
                                                dtype=F64), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", ["KQ", "p"])
def test_restarts_other_parameterizations(a1, kind):
    """(K, Q) and p paths take restarts too: at the first radius the best of the starts is no
    worse than the path without them."""
    problem, _, _ = a1
    if kind == "KQ":
        make = lambda: A.KQAttention.init(2, generator=A.set_seed(1))        # noqa: E731
    else:
        make = lambda: A.PromptAttention(torch.tensor([0.1, -0.2], dtype=F64))   # noqa: E731
    plain = A.regularization_path(make(), problem, [50.0, 100.0], steps=30, warn=False)
    more = A.regularization_path(make(), problem, [50.0, 100.0], steps=30, warn=False, restarts=2,
                                 seed=0)
    assert float(more.loss[0]) <= float(plain.loss[0]) * (1 + 1e-12)
    assert more.restart_corr.shape == (2, 2) and more.start.shape == (2,)
    assert "2 random restarts" in str(more.provenance())


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None, 10 ** 6, float("nan")])
def test_bad_restarts_are_value_errors(a1, bad):
    problem, _, _ = a1
    with pytest.raises(ValueError, match="restarts must be an integer"):
        A.regularization_path(A.WAttention(torch.eye(2, dtype=F64)), problem, [1.0], restarts=bad)


def test_bad_restart_seed_and_generator(a1):
    problem, _, _ = a1
    W = A.WAttention(torch.eye(2, dtype=F64))
    with pytest.raises(ValueError, match="not both"):
        A.regularization_path(W, problem, [1.0], restarts=1, seed=1, generator=A.set_seed(1))
    for seed in (-1, 2 ** 64, 1.5, "1"):
        with pytest.raises(ValueError, match="seed must be an integer"):
            A.regularization_path(W, problem, [1.0], restarts=1, seed=seed)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        A.regularization_path(W, problem, [1.0], restarts=1, generator=3)
    with pytest.raises(ValueError, match="corr_tol"):
        A.regularization_path(W, problem, [1.0], steps=1, warn=False).provenance(corr_tol=-1)


def test_path_trials_shapes(a1):
    """Batched parameters on a problem without trials: the problem is shared (same result as
    stacking it); one shared parameter on a batched problem is refused with a ValueError."""
    problem, _, _ = a1
    starts = torch.randn(2, 2, 2, generator=A.set_seed(3), dtype=F64)
    shared = A.regularization_path(A.WAttention(starts), problem, RADII[:2], steps=10, warn=False)
    stacked = A.regularization_path(A.WAttention(starts), A.Problem.stack([problem] * 2), RADII[:2],
                                    steps=10, warn=False)
    assert torch.allclose(shared.iterates, stacked.iterates, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="one set of parameters per trial"):
        A.regularization_path(A.WAttention(starts[0]), A.Problem.stack([problem] * 2), [1.0])


def test_restarts_with_a_nonlinear_head():
    """With an MLP head the path compares starts by the risk alone; restarts must work there too."""
    g = A.set_seed(3)
    P = A.random_problem(2, 3, 3, trials=2, generator=g)
    V = torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    W0 = 0.01 * torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    result = A.regularization_path(A.WAttention(W0), P, [1.0, 3.0], head=A.MLPHead(V), steps=50,
                                   restarts=2, seed=0, warn=False)
    assert result.iterates.shape == (2, 2, 3, 3) and bool(torch.isfinite(result.iterates).all())
    assert result.start.shape == (2, 2) and int(result.start.max()) <= 4


def test_recent_window_keeps_the_sequential_fold_of_no_worse():
    """The non-monotone test's window (path_descent._Recent) against the plain fold over the last
    MEMORY scores, on scores built to make no_worse intransitive: risks a few ulps apart (within
    its rounding allowance), ties, and top tokens that switch between the excess and the risk."""
    from attnsvm.model.gradients import Evaluation, no_worse
    from attnsvm.model._path_descent import MEMORY, _Recent

    g = torch.Generator().manual_seed(0)
    trials, n, eps = 64, 3, torch.finfo(torch.float64).eps

    def score():
        risk = 1.0 + eps * torch.randint(-12, 13, (trials,), generator=g).to(torch.float64)
        excess = 1e-3 * (1.0 + eps * torch.randint(-12, 13, (trials,), generator=g).to(torch.float64))
        top = torch.randint(0, 2, (trials, n), generator=g)
        return Evaluation(risk, torch.empty(0), [], top, excess)

    history = [score()]
    recent = _Recent(history[0])
    intransitive = 0
    for _ in range(40):
        trial = score()
        window = history[-MEMORY:]
        worst = window[0]
        for other in window[1:]:
            keep = no_worse(worst, other)
            worst = Evaluation(torch.where(keep, other.risk, worst.risk), worst.probs, [],
                               torch.where(keep[:, None], other.top, worst.top),
                               torch.where(keep, other.excess, worst.excess))
        expected = no_worse(trial, worst)
        assert torch.equal(recent.no_worse_than_worst(trial), expected)
        # the plain maximum would differ where the relation is not transitive
        intransitive += int((expected != torch.stack([no_worse(trial, w) for w in window]).all(0)).sum())
        recent.push(trial)
        history.append(trial)
    assert intransitive > 0
