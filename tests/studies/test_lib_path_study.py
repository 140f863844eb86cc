"""The path-study machinery (attnsvm.studies.path_study) and plot.draw_selection: hand-computed cases that
fail when a formula is wrong, hard cases (saturated softmax, traps), reproducibility from a seed and
refusals of bad input."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

import attnsvm as A
from attnsvm.book import plot
from attnsvm.studies.path_study import (GlobalPath, c_star_margin, candidate_directions, dip, excess_loss, global_path,
                                limit_offset, random_starts, selection_table)

F64 = torch.float64


def _one_example():
    """n = 1, T = 2, d = 2: tokens (1, 0) and (0, 0), query e_1, v = e_1: scores (1, 0); the
    margin of W is W[0, 0]."""
    X = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]], dtype=F64)
    return A.Problem(X, torch.ones(1, dtype=F64), torch.tensor([[1.0, 0.0]], dtype=F64),
                     torch.tensor([1.0, 0.0], dtype=F64))


def _trap():
    """The designed instance of book chapter 1: selecting token 2 is locally optimal, not global;
    W^mm(token 2) = e_1 e_1^T by hand."""
    X = torch.tensor([[[-1.0, 1.5], [1.0, 0.0], [0.0, 0.0]]], dtype=F64)
    return A.Problem(X, torch.ones(1, dtype=F64), torch.tensor([[1.0, 0.0]], dtype=F64),
                     torch.tensor([1.0, 2.0], dtype=F64) / 5 ** 0.5)


def _two_supports():
    """Two examples with the same query e_1 and token differences (1, 1) and (1, -1): W^mm =
    e_1 e_1^T with both constraints active; scores (2, 1) and (0, -1)."""
    X = torch.tensor([[[2.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [-1.0, 1.0]]], dtype=F64)
    Z = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64)
    return A.Problem(X, torch.ones(2, dtype=F64), Z, torch.tensor([1.0, 0.0], dtype=F64))


# --- random_starts -------------------------------------------------------------------------------

def test_random_starts_shape_scale_and_seed():
    a = random_starts(5, 3, A.set_seed(7))
    b = random_starts(5, 3, A.set_seed(7))
    assert a.shape == (5, 3, 3) and a.dtype == F64
    assert torch.equal(a, b)                                                  # same seed, same starts
    assert not torch.equal(a, random_starts(5, 3, A.set_seed(8)))
    assert torch.allclose(random_starts(5, 3, A.set_seed(7), scale=1.0) * 1e-2, a, rtol=1e-15, atol=0)
    assert 1e-3 < float(a.std()) < 1e-1


@pytest.mark.parametrize("args, error", [((0, 2), ValueError), ((True, 2), TypeError), ((2, 0), ValueError),
                                         ((2.5, 2), TypeError)])
def test_random_starts_refuses_bad_sizes(args, error):
    with pytest.raises(error):
        random_starts(*args, A.set_seed(0))


def test_random_starts_refuses_bad_generator_and_scale():
    with pytest.raises(TypeError):
        random_starts(2, 2, None)
    with pytest.raises(TypeError):
        random_starts(2, 2, 0)
    with pytest.raises(ValueError):
        random_starts(2, 2, A.set_seed(0), scale=-1.0)


# --- excess_loss ---------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [0.0, 2.0, -3.0])
def test_excess_loss_by_hand(c):
    P = _one_example()
    W = torch.tensor([[c, 0.0], [0.0, 0.0]], dtype=F64)          # logits (c, 0): s_1 = sigmoid(c)
    s = 1 / (1 + math.exp(-c))
    expected = math.log1p(math.exp(-s)) - math.log1p(math.exp(-1.0))
    assert float(excess_loss(W, P)) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # alpha = token 2 (score 0): the hard-selection loss is log 2
    assert float(excess_loss(W, P, torch.tensor([1]))) == pytest.approx(
        math.log1p(math.exp(-s)) - math.log(2.0), rel=1e-12)
    expected_exp = math.exp(-s) - math.exp(-1.0)
    assert float(excess_loss(W, P, loss="exponential")) == pytest.approx(expected_exp, rel=1e-12)


def test_excess_loss_is_accurate_where_the_losses_agree_to_every_digit():
    P = _one_example()
    W = torch.tensor([[600.0, 0.0], [0.0, 0.0]], dtype=F64)      # 1 - s_1 = e^-600
    naive = A.empirical_risk(A.WAttention(W), P).detach() - math.log1p(math.exp(-1.0))
    assert float(naive) == 0.0                                    # the direct difference is lost
    value = float(excess_loss(W, P))
    expected = math.exp(-600.0) / (1 + math.e)                    # kappa (1 - s_1) (gamma_1 - gamma_2)
    assert value == pytest.approx(expected, rel=1e-9)
    farther = float(excess_loss(W * 1.01, P))
    assert 0 < farther < value                                    # it still ranks the two points


def test_excess_loss_batches_over_matrices_and_trials():
    P = A.random_problem(3, 4, 2, generator=A.set_seed(0))
    W = random_starts(6, 2, A.set_seed(1), scale=5.0)
    batched = excess_loss(W, P)
    assert batched.shape == (6,)
    assert torch.allclose(batched, torch.stack([excess_loss(w, P) for w in W]), rtol=1e-13, atol=0)
    stacked = excess_loss(W, A.Problem.stack([P] * 6))
    assert torch.equal(stacked, batched)
    assert bool((batched > 0).all())                              # L > L* for every finite W


def test_excess_loss_refuses_bad_input():
    P = _one_example()
    W = torch.zeros(2, 2, dtype=F64)
    with pytest.raises(ValueError):
        excess_loss(torch.zeros(3, 3, dtype=F64), P)
    with pytest.raises(ValueError):
        excess_loss(torch.full((2, 2), float("nan"), dtype=F64), P)
    with pytest.raises(ValueError):
        excess_loss(W, P, torch.tensor([2]))                      # token index out of range
    with pytest.raises(ValueError):
        excess_loss(W, P, torch.tensor([0, 0]))                   # n = 1
    with pytest.raises(TypeError):
        excess_loss(W, "problem")
    with pytest.raises(ValueError):
        excess_loss(W, P, loss="hinge")


# --- candidate_directions --------------------------------------------------------------------------

def test_candidate_directions_on_the_designed_trap():
    kinds = A.maxmargin.classify_selections(_trap())
    alphas, labels, D = candidate_directions(kinds)
    assert alphas == [(0,), (1,)] and labels == ["global", "locally optimal"]
    assert D.shape == (2, 2, 2)
    assert torch.allclose(torch.linalg.matrix_norm(D), torch.ones(2, dtype=F64))
    assert torch.allclose(D[1], torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64), atol=1e-9)


def test_candidate_directions_refuses_bad_input():
    with pytest.raises(ValueError):
        candidate_directions({(0,): ("infeasible", None)})
    with pytest.raises(TypeError):
        candidate_directions([("global", None)])
    with pytest.raises(TypeError):
        candidate_directions({(0,): ("global", None)})


# --- global_path -----------------------------------------------------------------------------------

def test_global_path_escapes_the_trap_and_records_the_winner():
    P = _trap()
    kinds = A.maxmargin.classify_selections(P)
    alphas, labels, D = candidate_directions(kinds)
    radii = torch.logspace(0, 1.5, 4)
    starts = random_starts(3, 2, A.set_seed(2))
    gp = global_path(P, radii, starts, D, fresh_from=5.0)
    assert isinstance(gp, GlobalPath) and gp.W.shape == (4, 2, 2) and gp.n_random == 3
    assert sorted(gp.fresh) == [k for k, R in enumerate(radii.tolist()) if R >= 5.0]
    for k in range(4):                                            # the winner is the lowest loss of the pool
        pool = [gp.rand.iterates[k]] + ([gp.fresh[k].iterates[0]] if k in gp.fresh else [])
        pool = torch.cat(pool)
        assert torch.equal(gp.W[k], pool[int(gp.winner[k])])
        assert float(excess_loss(gp.W[k], P)) <= float(excess_loss(pool, P).min())
    assert torch.equal(gp.from_candidate, gp.winner >= 3)
    assert float(A.corr(gp.W[-1], D[0])) > 0.999                  # ends at the global direction
    again = global_path(P, radii, random_starts(3, 2, A.set_seed(2)), D, fresh_from=5.0)
    assert torch.equal(again.W, gp.W) and torch.equal(again.winner, gp.winner)


def test_global_path_without_fresh_starts_is_the_random_path():
    P = _trap()
    _, _, D = candidate_directions(A.maxmargin.classify_selections(P))
    radii = torch.tensor([1.0, 2.0])
    gp = global_path(P, radii, random_starts(2, 2, A.set_seed(0)), D, fresh_from=1e9)
    assert gp.fresh == {} and not bool(gp.from_candidate.any())
    best = [gp.rand.iterates[k, int(excess_loss(gp.rand.iterates[k], P).argmin())] for k in range(2)]
    assert torch.equal(gp.W, torch.stack(best))


def test_global_path_refuses_bad_input():
    P = _trap()
    _, _, D = candidate_directions(A.maxmargin.classify_selections(P))
    starts = random_starts(2, 2, A.set_seed(0))
    with pytest.raises(ValueError):
        global_path(P, [1.0], starts[0], D, fresh_from=1.0)       # starts must be a stack
    with pytest.raises(ValueError):
        global_path(P, [2.0, 1.0], starts, D, fresh_from=1.0)     # radii must increase
    with pytest.raises(ValueError):
        global_path(P, [1.0], starts, D, fresh_from=0.0)
    with pytest.raises(ValueError):
        global_path(A.Problem.stack([P, P]), [1.0], starts, D, fresh_from=1.0)
    with pytest.raises(TypeError):
        global_path(P, [1.0], starts, D, fresh_from="10")


# --- limit_offset ----------------------------------------------------------------------------------

@pytest.mark.parametrize("loss, t", [("exponential", -1.0),
                                     ("logistic", 0.5 * math.log(2 / (1 + math.exp(2.0))))])
def test_limit_offset_by_hand(loss, t):
    """g(delta) = w_1 e^{-t} + w_2 e^{t} with t = delta[1, 0] and w_i = kappa_i (scores gaps 1):
    minimiser t = log(w_1 / w_2) / 2 (exponential: w = (e^-2, 1), t = -1)."""
    P = _two_supports()
    svm = A.att_svm(P.X, P.Z, P.opt)
    assert torch.allclose(svm.W, torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64), atol=1e-9)
    assert bool(svm.support[:, 1].all())
    delta = limit_offset(P, svm, loss)
    expected = torch.tensor([[0.0, 0.0], [t, 0.0]], dtype=F64)
    assert torch.allclose(delta, expected, atol=1e-7), (delta, expected)


def test_limit_offset_is_stationary_on_a_random_instance():
    P = A.random_problem(4, 5, 6, generator=A.set_seed(0))
    svm = A.att_svm(P.X, P.Z, P.opt)
    delta = limit_offset(P, svm)
    D = svm.W / svm.W.norm()
    assert abs(float((delta * D).sum())) < 1e-12                  # orthogonal to W^mm
    F = A.maxmargin.constraint_features(P.X, P.Z, P.opt)
    gamma = P.scores
    i, t = svm.support.nonzero(as_tuple=True)
    kappa = torch.sigmoid(-gamma[i, P.opt[i]])

    def g(x):
        x = x - (x * D).sum() * D
        return (kappa * (gamma[i, P.opt[i]] - gamma[i, t]) * torch.exp(-(F[i, t] * x).sum((-2, -1)))).sum()

    point = delta.clone().requires_grad_(True)
    grad, = torch.autograd.grad(g(point), point)
    assert float(grad.norm()) < 1e-8
    for seed in range(5):                                         # no nearby point does better
        step = 1e-2 * torch.randn(6, 6, generator=A.set_seed(seed), dtype=F64)
        assert float(g(delta + step)) >= float(g(delta))


def test_limit_offset_refuses_a_foreign_svm():
    P = _two_supports()
    other = A.att_svm(P.X, P.Z, torch.tensor([1, 1]))             # another selection's solution
    with pytest.raises(ValueError):
        limit_offset(P, other)
    with pytest.raises(TypeError):
        limit_offset(P, A.att_svm(P.X, P.Z, P.opt, "nuc"))
    with pytest.raises(TypeError):
        limit_offset(P, None)
    with pytest.raises(ValueError):
        limit_offset(P, A.att_svm(P.X, P.Z, P.opt), loss="hinge")


# --- dip -------------------------------------------------------------------------------------------

def test_dip_by_hand():
    depth, bottom, top = dip(torch.tensor([0.5, 0.9, 0.7, 0.8, 1.0]))
    assert depth == pytest.approx(0.2) and (bottom, top) == (2, 1)
    assert dip(torch.tensor([0.1, 0.2, 0.2, 0.3])) == (0.0, 0, 0)  # nondecreasing: no dip
    assert dip([1.0, 0.0, 0.5, -0.5, 2.0])[:2] == (1.5, 3)           # the deepest of two dips


@pytest.mark.parametrize("curve", [torch.zeros(2, 2), torch.zeros(0), torch.tensor([0.1, float("nan")])])
def test_dip_refuses_bad_curves(curve):
    with pytest.raises(ValueError):
        dip(curve)


# --- c_star_margin ---------------------------------------------------------------------------------

def test_c_star_margin_by_hand():
    """Margin W[0, 0] >= 1: W^mm_* = e_1 e_1^T, C* = 1; I has nuclear norm 2 (measure 1/2),
    [[1, 1], [0, 0]] has nuclear norm sqrt 2 (measure 1/sqrt 2)."""
    P = _one_example()
    nuc = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    iterates = torch.stack([3 * nuc, torch.eye(2, dtype=F64), torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=F64)])
    value = c_star_margin(iterates, P, P.opt, nuc)
    assert torch.allclose(value, torch.tensor([1.0, 0.5, 2 ** -0.5], dtype=F64), rtol=1e-14)
    assert float(c_star_margin(-nuc, P, P.opt, nuc)) == pytest.approx(-1.0)     # selects the other token


def test_c_star_margin_is_one_on_the_solver_solution_and_batches():
    P = A.random_problem(3, 4, 5, trials=2, generator=A.set_seed(3))
    nuc = torch.stack([A.att_svm(P.X[b], P.Z[b], P.opt[b], "nuc").W for b in range(2)])
    fro = torch.stack([A.att_svm(P.X[b], P.Z[b], P.opt[b]).W for b in range(2)])
    value = c_star_margin(torch.stack([nuc, 7 * nuc, fro]), P, P.opt, nuc)
    assert value.shape == (3, 2)
    assert torch.allclose(value[:2], torch.ones(2, 2, dtype=F64), atol=1e-6)     # scale-invariant
    assert bool((value[2] <= 1 + 1e-6).all())                                      # at most 1


def test_c_star_margin_refuses_bad_input():
    P = _one_example()
    nuc = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    with pytest.raises(ValueError):
        c_star_margin(torch.zeros(2, 2, dtype=F64), P, P.opt, nuc)          # a zero W has no direction
    with pytest.raises(ValueError):
        c_star_margin(nuc, P, P.opt, torch.stack([nuc, nuc]))            # nuc has trials, P has none
    with pytest.raises(ValueError):
        c_star_margin(torch.eye(3, dtype=F64), P, P.opt, nuc)
    with pytest.raises(TypeError):
        c_star_margin(nuc, P.X, P.opt, nuc)


# --- selection_table and draw_selection ---------------------------------------------------------------

def test_selection_table_on_the_designed_trap():
    P = _trap()
    kinds = A.maxmargin.classify_selections(P)
    text = selection_table(P, torch.tensor([1]), kinds[(1,)][1])
    rows = text.splitlines()
    assert rows[-1] == "locally optimal per example: [True]"
    assert "2.0000" in text and "1.0000" in text                  # token 1 margin 2, token 3 margin 1
    token3 = next(r for r in rows if r.split()[:2] == ["1", "3"])
    assert "yes" in token3                                        # the support token
    bad = selection_table(P, torch.tensor([2]), kinds[(2,)][1])
    assert bad.splitlines()[-1] == "locally optimal per example: [False]"


def test_selection_table_refuses_bad_input():
    P = _trap()
    res = A.maxmargin.classify_selections(P)[(1,)][1]
    with pytest.raises(ValueError):
        selection_table(P, torch.tensor([1, 1]), res)
    with pytest.raises(TypeError):
        selection_table(P, torch.tensor([1]), None)


def test_draw_selection_draws_one_arrow_and_line_per_example():
    P = A.figure_problem("A2", generator=A.set_seed(3))
    svm = A.att_svm(P.X, P.Z, P.opt)
    fig, ax = plt.subplots()
    plot.draw_selection(ax, P, P.opt, svm.W, svm.support, "A2")
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == P.n                                      # an arrow u_i per example
    assert sum("tight margin" in str(line.get_label()) for line in ax.get_lines()) == P.n
    assert ax.get_title() == "A2"
    with pytest.raises(ValueError):
        plot.draw_selection(ax, P, P.opt, svm.W, svm.support.float(), "bad")
    with pytest.raises(ValueError):
        plot.draw_selection(ax, P, P.opt, svm.W, svm.support, "bad", examples=[P.n])
    plt.close(fig)


def test_limit_offset_refuses_the_svm_of_a_problem_of_another_size():
    """Same d, other (n, T): refused by name, not by a shape error deep in the computation."""
    P = _two_supports()
    other = _one_example()
    with pytest.raises(TypeError, match="margins"):
        limit_offset(P, A.att_svm(other.X, other.Z, other.opt))


def test_dip_refuses_a_depth_that_overflows():
    assert dip([1e300, -1e300])[0] == pytest.approx(2e300)
    with pytest.raises(ValueError, match="overflows"):
        dip([1e308, -1e308])


def test_c_star_margin_refuses_no_iterates():
    P = _one_example()
    nuc = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=F64)
    with pytest.raises(ValueError, match="at least one matrix"):
        c_star_margin(torch.zeros(0, 2, 2, dtype=F64), P, P.opt, nuc)


def test_global_path_refuses_empty_stacks_and_zero_directions():
    P = _one_example()
    starts = random_starts(2, 2, A.set_seed(0))
    D = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]], dtype=F64)
    for s, d in ((starts[:0], D), (starts, D[:0])):
        with pytest.raises(ValueError, match="at least one matrix"):
            global_path(P, [1.0], s, d, fresh_from=1.0)
    with pytest.raises(ValueError, match="nonzero"):
        global_path(P, [1.0], starts, 0 * D, fresh_from=1.0)
