"""The A4 study (attnsvm.studies.a4) and the basin map (attnsvm.studies.basin): friendly and hard cases,
reproducibility from a seed, and checks that fail when the machinery is wrong."""

import math

import pytest
import torch

import attnsvm as A
from attnsvm.maxmargin import selections

F64 = torch.float64


# --- seeded instances and runs ---------------------------------------------------------------------

@pytest.fixture(autouse=True)
def empty_memory_of_solved_svms():
    """Each test starts with selections' memory of solved Att-SVMs empty (no order dependence)."""
    selections._SOLVED.clear()
    selections._SOLVED_BYTES[0] = 0
    yield
    selections._SOLVED.clear()
    selections._SOLVED_BYTES[0] = 0


def test_a_remembered_result_changed_by_its_caller_does_not_change_later_answers():
    P = A.random_problem(2, 3, 4, generator=A.set_seed(5))
    first = A.maxmargin.classify_selections(P)
    for kind, result in first.values():           # a caller editing what it got, in place
        if result is not None:
            result.W.mul_(0)
            result.support.fill_(not bool(result.support.any()))
            result.margins.fill_(0.0)
    assert {alpha: kind for alpha, (kind, _) in A.maxmargin.classify_selections(P).items()} == \
        {alpha: kind for alpha, (kind, _) in first.items()}
    for alpha, (kind, result) in A.maxmargin.classify_selections(P).items():
        if result is not None:
            fresh = A.att_svm(P.X, P.Z, torch.tensor(alpha))
            assert torch.equal(result.W, fresh.W) and torch.equal(result.support, fresh.support)


def test_seeded_instances_slices_one_draw():
    P, g = A.studies.seeded_instances(3, 4, 5, 7, 10, drawn=50)
    head, g2 = A.studies.seeded_instances(3, 4, 5, 7, 4, drawn=50)
    tail, _ = A.studies.seeded_instances(3, 4, 5, 7, 10, start=4, drawn=50)
    assert P.X.shape == (10, 3, 4, 5)
    assert torch.equal(P.X[:4], head.X) and torch.equal(P.X[4:], tail.X)      # the same draw, sliced
    assert torch.equal(torch.randn(3, generator=g), torch.randn(3, generator=g2))   # generator after the draw
    other, _ = A.studies.seeded_instances(3, 4, 5, 8, 10, drawn=50)
    assert not torch.equal(P.X, other.X)                                      # another seed, other data


@pytest.mark.parametrize("kw", [dict(start=5, stop=5), dict(start=0, stop=20, drawn=10), dict(start=-1, stop=3)])
def test_seeded_instances_refuses_bad_slices(kw):
    stop = kw.pop("stop")
    with pytest.raises(ValueError):
        A.studies.seeded_instances(2, 3, 4, 0, stop, **kw)


def test_a4_seed_one_per_cell():
    assert A.studies.a4_seed(5, 5, 2) == 1_050_502
    seeds = {A.studies.a4_seed(n, T, d) for n in (4, 5, 6) for T in (4, 5, 8) for d in A.studies.A4_D}
    assert len(seeds) == 3 * 3 * len(A.studies.A4_D)
    with pytest.raises(ValueError, match="below 100"):
        A.studies.a4_seed(5, 5, 100)


def test_one_input_runs_reach_opt():
    """n = 1, T = 2: opt is the only locally optimal selection and NGD from 0 reaches it (a wrong
    classification or a wrong protocol would show up as another outcome)."""
    P, _ = A.studies.seeded_instances(1, 2, 3, 11, 8)
    probabilities, kinds = A.studies.ngd_outcomes(P, steps=400)
    assert kinds == ["global"] * 8
    assert bool((A.selected_tokens(probabilities) == P.opt).all())


def test_a4_runs_reproducible_and_init_matters():
    p1, k1 = A.studies.a4_runs(5, 5, 3, 6, steps=200, drawn=20)
    p2, k2 = A.studies.a4_runs(5, 5, 3, 6, steps=200, drawn=20)
    assert torch.equal(p1, p2) and k1 == k2
    pr, _ = A.studies.a4_runs(5, 5, 3, 6, steps=200, drawn=20, init="random")
    assert not torch.allclose(p1, pr)
    # a slice of the random-start runs is the same start for the same instance
    part, _ = A.studies.a4_runs(5, 5, 3, 6, start=2, steps=200, drawn=20, init="random")
    assert torch.allclose(part, pr[2:], atol=1e-12)
    with pytest.raises(ValueError, match="init"):
        A.studies.a4_runs(5, 5, 3, 6, init="ones")


def test_ngd_outcomes_matches_train_including_deep_saturation():
    """The logit-space program against an independent computation: A.train's normalized GD on W
    (autograd-free closed form on the d x d matrix), from 0 and from a start so large that the
    softmax is saturated to 1e-40 (where only the re-centred gradient keeps the direction)."""
    P, g = A.studies.seeded_instances(4, 5, 6, 21, 12)
    for W0 in (torch.zeros(12, 6, 6, dtype=F64), 30.0 * torch.randn(12, 6, 6, generator=g, dtype=F64)):
        probabilities, _ = A.studies.ngd_outcomes(P, W0, steps=150, lr=0.1, saturation=None)
        att = A.WAttention(W0.clone())
        A.train(att, P, 150, 0.1, method="ngd", log_every=150)
        ref = att.probabilities(P)
        assert torch.allclose(probabilities, ref, rtol=1e-8, atol=1e-300)
        assert float(ref.max(-1).values.min()) < 1 or float((1 - ref.max(-1).values).max()) < 1e-30


def test_a4_budgets_pass_through_and_pad():
    """A budget of a longer run is the shorter run; runs of several d in one program (zero-padded)
    are the runs of each d alone; a4_runs is the same program."""
    both = A.studies.a4_budgets(5, 5, (2, 3), 8, drawn=20, budgets=(120, 40))
    for d in (2, 3):
        alone = A.studies.a4_budgets(5, 5, (d,), 8, drawn=20, budgets=(40,))[d][40]
        assert torch.allclose(both[d][40], alone, rtol=1e-12, atol=0)
        p120, _ = A.studies.a4_runs(5, 5, d, 8, drawn=20, steps=120)
        assert torch.allclose(both[d][120], p120, rtol=1e-12, atol=0)
        assert not torch.allclose(both[d][40], both[d][120])
    start = A.studies.a4_budgets(5, 5, (3,), 8, start=5, drawn=20, budgets=(40,), init="random")[3][40]
    full = A.studies.a4_budgets(5, 5, (3,), 8, drawn=20, budgets=(40,), init="random")[3][40]
    assert torch.allclose(start, full[5:], rtol=1e-12, atol=0)
    for bad in ((), "20", (0,), (2.5,)):
        with pytest.raises((TypeError, ValueError)):
            A.studies.a4_budgets(5, 5, (2,), 8, budgets=bad)
    with pytest.raises(TypeError):
        A.studies.a4_budgets(5, 5, 2, 8)


def test_compiled_logit_path_is_the_plain_loop_bit_for_bit():
    """The loop of ngd_logit_path, compiled (TorchScript where available), gives the plain Python
    loop's numbers exactly, at every budget, from W = 0 (tied logits) and from a random start; its
    probabilities are ordinary tensors (not inference tensors) that autograd code may use."""
    from attnsvm.studies import _a4_path as a4_path
    P, g = A.studies.seeded_instances(5, 4, 3, 31, 9)
    for logits in (torch.zeros(9, 5, 4, dtype=F64), 5.0 * torch.randn(9, 5, 4, generator=g, dtype=F64)):
        args, before = (P.X, P.Z, P.Y, P.scores * P.Y.unsqueeze(-1), logits), logits.clone()
        path = a4_path.ngd_logit_path(*args, (60, 7), 0.1)
        layout = [args[0].permute(1, 2, 3, 0).contiguous(),
                  (args[1] @ args[1].transpose(-1, -2)).permute(1, 2, 0).unsqueeze(2).contiguous(),
                  args[3].permute(1, 2, 0).contiguous(), (-args[2]).T.unsqueeze(1).contiguous(),
                  logits.permute(1, 2, 0).contiguous()]
        plain = a4_path._ngd_logit_steps(*layout, [7, 60], 0.1)
        assert sorted(path) == [7, 60]
        for step in (7, 60):
            assert torch.equal(path[step], plain[step].permute(2, 0, 1))
            assert not path[step].is_inference() and path[step].is_contiguous()
        assert not torch.equal(path[7], path[60])
        assert torch.equal(logits, before)            # the caller's logits are not changed
    (path[60] * torch.ones(1, requires_grad=True, dtype=F64)).sum().backward()


def test_ngd_outcomes_checks_w0_and_saturation():
    P, _ = A.studies.seeded_instances(2, 3, 4, 0, 3)
    with pytest.raises(ValueError, match="W0 must have shape"):
        A.studies.ngd_outcomes(P, torch.zeros(2, 4, 4, dtype=F64))
    with pytest.raises(ValueError, match="saturation"):
        A.studies.ngd_outcomes(P, saturation=0.3)
    with pytest.raises(ValueError, match="one trials dimension"):
        A.studies.ngd_outcomes(P.trial(0))


# --- counts, thresholds, feasibility ---------------------------------------------------------------

def test_outcome_counts():
    c = A.studies.outcome_counts(["global", "global", "locally optimal", "unsaturated", "not locally optimal"])
    assert c["N"] == 5 and c["global"] == 2 and c["local incl. global"] == 3 and c["neither"] == 2
    assert c["ill-conditioned"] == 0
    for bad in (["global", "infeasible"], [], "global"):
        with pytest.raises((ValueError, TypeError)):
            A.studies.outcome_counts(bad)


def test_argmax_rule_and_threshold_band():
    P, _ = A.studies.seeded_instances(5, 5, 2, A.studies.a4_seed(5, 5, 2), 30, drawn=500)
    probabilities, kinds = A.studies.ngd_outcomes(P, steps=300)
    band = A.studies.outcomes_by_threshold(P, probabilities)
    assert band[None]["unsaturated"] == 0 and band[None]["N"] == 30
    assert A.studies.outcome_counts(kinds) == band[0.99]
    unsat = [band[lv]["unsaturated"] for lv in (None, 0.9, 0.99, 0.999)]
    assert unsat == sorted(unsat) and unsat[-1] > 0          # stricter rule, more runs not yet chosen
    alpha, argmax_kinds = A.maxmargin.run_outcomes(P, probabilities, saturation=None)
    assert torch.equal(alpha, A.selected_tokens(probabilities)) and "unsaturated" not in argmax_kinds
    for level, counts in band.items():                       # one classification = one per level
        assert counts == A.studies.outcome_counts(A.maxmargin.run_outcomes(P, probabilities, saturation=level)[1])
    with pytest.raises(ValueError, match="saturation"):
        A.studies.outcomes_by_threshold(P, probabilities, levels=(None, 1.5))


def test_ngd_outcomes_match_train_at_d2_under_every_rule():
    """At d = 2 and 2000 steps the runs are chaotic (A.train against itself from a start moved by
    1e-13 differs by 1e-2 in probability), so the independent check compares outcomes, not
    probabilities: the batched logit program and A.train's normalized GD on W give the same outcome
    for every run under the argmax rule and the thresholds 0.9 / 0.99 / 0.999."""
    P, _ = A.studies.seeded_instances(5, 5, 2, A.studies.a4_seed(5, 5, 2), 24, drawn=500)
    probabilities, _ = A.studies.a4_runs(5, 5, 2, 24, drawn=500, steps=2000)
    att = A.WAttention.zeros(2, 24)
    A.train(att, P, 2000, 0.1, method="ngd", log_every=2000)
    reference = att.probabilities(P).detach()
    kinds = set()
    for level in (None, 0.9, 0.99, 0.999):
        ours = A.maxmargin.run_outcomes(P, probabilities, saturation=level)[1]
        assert ours == A.maxmargin.run_outcomes(P, reference, saturation=level)[1], level
        kinds |= set(ours)
    assert {"global", "unsaturated"} <= kinds and len(kinds) >= 3      # not a trivially uniform batch


def test_att_svm_feasible_of_opt_friendly_and_hard():
    P, _ = A.studies.seeded_instances(3, 3, 6, 1, 5)            # d >= max(n, T - 1): every selection feasible
    assert all(A.att_svm_feasible(P))
    # two examples with the same tokens and query, opposite labels: the optimal tokens differ, and no
    # W can make both win (hard case: infeasible)
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=F64).expand(2, -1, -1)
    Z = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=F64)
    Q = A.Problem(X[None], torch.tensor([[1.0, -1.0]], dtype=F64), Z[None], torch.tensor([1.0, 0.0], dtype=F64))
    assert Q.opt.tolist() == [[0, 1]]
    assert A.att_svm_feasible(Q) == [False]
    assert A.att_svm_feasible(Q.trial(0)) is False


def _kind_by_definition(P: A.Problem, alpha: tuple) -> str:
    """An independent classification: the public att_svm, is_global and is_locally_optimal."""
    try:
        result = A.att_svm(P.X, P.Z, torch.tensor(alpha), mask=P.mask)
    except A.InfeasibleError:
        return "infeasible"
    if bool(A.model.is_global(P, torch.tensor(alpha))):
        return "global"
    return "locally optimal" if bool(A.is_locally_optimal(P, torch.tensor(alpha), result).all()) \
        else "not locally optimal"


@pytest.mark.parametrize("seed,n,T,d", [(0, 3, 3, 2), (1, 2, 4, 2), (2, 3, 3, 10), (3, 1, 5, 2)])
def test_classify_selections_matches_the_definitions_selection_by_selection(seed, n, T, d):
    P = A.random_problem(n, T, d, generator=A.set_seed(seed))
    kinds = A.maxmargin.classify_selections(P)
    assert len(kinds) == T ** n
    assert {kind for kind, _ in kinds.values()} >= {"global"} or d < max(n, T - 1)
    for alpha, (kind, result) in kinds.items():
        assert kind == _kind_by_definition(P, alpha) == A.selection_kind(P, alpha)[0]
        if result is not None:       # the remembered solution is the one a fresh solve gives
            assert torch.equal(result.W, A.att_svm(P.X, P.Z, torch.tensor(alpha)).W)


def test_classification_depends_on_the_labels_not_only_on_the_remembered_svm():
    # the same tokens and queries with the labels flipped: the SVMs (remembered by X, Z) are the
    # same, but opt and the local optimality change with the scores
    P = A.random_problem(2, 3, 4, generator=A.set_seed(7))
    Q = A.Problem(P.X, -P.Y, P.Z, P.v)
    kinds_P, kinds_Q = A.maxmargin.classify_selections(P), A.maxmargin.classify_selections(Q)
    assert tuple(P.opt.tolist()) != tuple(Q.opt.tolist())
    assert kinds_P[tuple(P.opt.tolist())][0] == kinds_Q[tuple(Q.opt.tolist())][0] == "global"
    for alpha in kinds_Q:
        assert kinds_Q[alpha][0] == _kind_by_definition(Q, alpha)
    assert len(selections._SOLVED) <= selections.SOLVED_MEMORY[0]
    assert sum(size for *_, size in selections._SOLVED.values()) == selections._SOLVED_BYTES[0] \
        <= selections.SOLVED_MEMORY[1]


def test_remembered_svms_are_bounded_and_evicted_oldest_first(monkeypatch):
    monkeypatch.setattr(selections, "SOLVED_MEMORY", (3, 10 ** 9))
    P = A.random_problem(2, 3, 3, generator=A.set_seed(12))
    first = A.maxmargin.classify_selections(P)
    assert len(selections._SOLVED) == 3
    assert selections._SOLVED_BYTES[0] == sum(size for *_, size in selections._SOLVED.values())
    again = A.maxmargin.classify_selections(P)            # every selection solved again after eviction
    for alpha, (kind, result) in first.items():
        assert again[alpha][0] == kind == _kind_by_definition(P, alpha)
    monkeypatch.setattr(selections, "SOLVED_MEMORY", (100, 1))      # a byte budget of one
    A.selection_kind(P, [0, 0])
    assert len(selections._SOLVED) == 0 and selections._SOLVED_BYTES[0] == 0


def test_run_outcomes_with_a_batched_mask_match_each_trial():
    # one instance, every selection that avoids token 2 of example 0, run once under a mask that
    # hides that token and once without: each run is classified against its own trial's mask
    P0 = A.random_problem(2, 3, 2, generator=A.set_seed(1))
    sels = torch.tensor([[a, b] for a in range(2) for b in range(3)] * 2)
    B = len(sels)
    mask = torch.ones(B, 2, 3, dtype=torch.bool)
    mask[:B // 2, 0, 2] = False
    P = A.Problem(P0.X.expand(B, -1, -1, -1), P0.Y.expand(B, -1), P0.Z.expand(B, -1, -1), P0.v, mask)
    probs = torch.nn.functional.one_hot(sels, 3).to(F64) * 0.998 + 0.001
    probs = probs.masked_fill(~mask, 0)
    alpha, kinds = A.maxmargin.run_outcomes(P, probs / probs.sum(-1, keepdim=True), saturation=None)
    assert torch.equal(alpha, sels)
    for b in range(B):
        assert kinds[b] == _kind_by_definition(P.trial(b), tuple(alpha[b].tolist()))
    assert kinds[:B // 2] != kinds[B // 2:]             # the mask changes some selection's kind


def test_att_svm_feasible_matches_att_svm_with_a_batched_mask():
    P = A.random_problem(3, 4, 2, trials=12, generator=A.set_seed(10))
    mask = torch.rand(12, 3, 4, generator=A.set_seed(11)) < 0.7
    mask[..., 0] = True
    P = A.Problem(P.X, P.Y, P.Z, P.v, mask)
    expected = []
    for b in range(12):
        Pb = P.trial(b)
        try:
            A.att_svm(Pb.X, Pb.Z, Pb.opt, mask=Pb.mask)
            expected.append(True)
        except A.InfeasibleError:
            expected.append(False)
    assert A.att_svm_feasible(P) == expected and 0 < sum(expected) < 12


# --- comparison with the paper's bars --------------------------------------------------------------

def _counts_at(percent_global: int, percent_local: int, N: int = 100) -> dict:
    kinds = (["global"] * percent_global + ["locally optimal"] * (percent_local - percent_global)
             + ["unsaturated"] * (100 - percent_local))
    return A.studies.outcome_counts(kinds * (N // 100))


def test_a4_compare_scores_zero_on_the_paper_and_flags_misses():
    paper = {d: _counts_at(g, l) for d, g, l in zip(A.studies.A4_D, A.studies.A4_PAPER["global"], A.studies.A4_PAPER["local incl. global"])}
    exact = A.studies.a4_compare(paper)
    assert exact.score == 0 and exact.outside == []
    off = dict(paper)
    off[2] = _counts_at(40, 60, N=500)                     # 23 and 24 points above the paper at d = 2
    result = A.studies.a4_compare(off)
    assert result.diffs[2, "global"] == pytest.approx(23) and result.diffs[2, "local incl. global"] == pytest.approx(24)
    assert result.score == pytest.approx(47 / 12)
    assert result.outside == [("global", 2), ("local incl. global", 2)]
    only_small = A.studies.a4_compare({2: off[2], 3: off[3]}, keys=("global",))       # a subset of d and bars
    assert set(only_small.diffs) == {(2, "global"), (3, "global")}
    with pytest.raises(ValueError, match="not one of"):
        A.studies.a4_compare({7: paper[2]})
    with pytest.raises(ValueError, match="unknown bars"):
        A.studies.a4_compare(paper, keys=("local",))


def test_a4_grid_structure():
    grid = A.studies.a4_grid([(2, 3), (3, 3)], 4, ds=(2, 20), drawn=10)
    assert set(grid) == {(2, 3), (3, 3)} and all(set(v) == {2, 20} for v in grid.values())
    probabilities, kinds = grid[2, 3][20]
    assert probabilities.shape == (4, 2, 3) and len(kinds) == 4
    with pytest.raises(TypeError):
        A.studies.a4_grid([2, 3], 4)


# --- the basin map ---------------------------------------------------------------------------------

def test_polar_starts_and_angles():
    u, angle, ratio = A.studies.polar_starts(2.0, 8, [0.5, 1.0, 4.0])
    assert u.shape == (24, 2) and torch.allclose(u.norm(dim=-1), 2.0 * ratio)
    assert torch.allclose(torch.atan2(u[:, 1], u[:, 0]) % (2 * math.pi), angle, atol=1e-12)
    ref = torch.tensor([1.0, 0.0], dtype=F64)
    tiny = torch.tensor([[1.0, 1e-9], [-1.0, 0.0], [0.0, 3.0]], dtype=F64)
    assert torch.allclose(A.studies.angle_between(tiny, ref), torch.tensor([1e-9, math.pi, math.pi / 2], dtype=F64),
                          rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="zero vector"):
        A.studies.angle_between(tiny, torch.zeros(2, dtype=F64))


def test_trap_instance_and_basin_map():
    trap = A.studies.local_trap_instance()
    again = A.studies.local_trap_instance()
    assert (trap.draw, trap.kept, trap.alpha) == (again.draw, again.kept, again.alpha)   # seeded
    P = trap.problem
    assert A.selection_kind(P, [trap.alpha])[0] == "locally optimal" and trap.alpha != int(P.opt[0])
    u_a = trap.svm.W @ P.Z[0]
    u_opt = A.att_svm(P.X, P.Z, P.opt).W @ P.Z[0]
    starts = torch.stack([3 * u_a, 3 * u_opt])              # deep on each ray: each ends at its own token
    runs = A.studies.basin_map(P, starts, {"NGD": ("ngd", 0.1)}, steps=300)["NGD"]
    assert A.studies.basin_labels(runs["alpha"], runs["kinds"], trap.alpha) == ["alpha", "opt"]
    assert A.studies.basin_labels(runs["alpha"], runs["kinds"]) == ["other selection", "opt"]
    grads = A.studies.initial_gradient_norms(P, starts)
    att = A.WAttention(starts[0][:, None] * P.Z[0][None, :])
    (g0,) = torch.autograd.grad(A.empirical_risk(att, P).sum(), att.params)
    assert float(grads[0]) == pytest.approx(float(g0.norm()), rel=1e-12)
    batch = A.studies.repeat_instance(P, 3)
    assert batch.batch_shape == (3,) and torch.equal(batch.X[2], P.X)
    with pytest.raises(ValueError, match="one input"):
        A.studies.basin_map(A.random_problem(2, 3, 2), starts, {"NGD": ("ngd", 0.1)})


def test_empirical_cones_cut_one_step_inside_the_first_failure():
    u, angle, ratio = A.studies.polar_starts(1.0, 36, [1.0, 2.0])
    ref = torch.tensor([1.0, 0.0], dtype=F64)
    theta = A.studies.angle_between(u, ref)
    success = (theta < math.radians(45)) | ((ratio > 1.5) & (theta < math.radians(75)))
    cones = {round(c["R0"], 6): c for c in A.studies.empirical_cones(u, ref, success, [1.0, 2.0], math.radians(10))}
    assert math.degrees(cones[1.0]["t_fail"]) == pytest.approx(50) and math.degrees(cones[1.0]["theta"]) == pytest.approx(40)
    assert math.degrees(cones[2.0]["theta"]) == pytest.approx(70) and cones[2.0]["count"] == 15
    assert cones[2.0]["mu"] == pytest.approx(1 - math.cos(math.radians(70)))
    with pytest.raises(TypeError):
        A.studies.empirical_cones(u, ref, success.int(), [1.0], 0.1)
