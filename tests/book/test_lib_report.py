"""The scale switch, the book's tables and claims, and selection classification."""

import pytest
import torch

import attnsvm as A


def test_scale_default_is_paper(monkeypatch):
    monkeypatch.delenv("ATTNSVM_SCALE", raising=False)
    assert A.book.scale() == "paper"
    assert A.book.at_scale(paper=100, quick=10) == 100


@pytest.mark.parametrize("value, expected", [("quick", 10), (" QUICK ", 10), ("paper", 100), ("", 100)])
def test_scale_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ATTNSVM_SCALE", value)
    assert A.book.at_scale(paper=100, quick=10) == expected


def test_unknown_scale_is_an_error(monkeypatch):
    monkeypatch.setenv("ATTNSVM_SCALE", "full")
    with pytest.raises(ValueError, match="ATTNSVM_SCALE='full' is not a scale"):
        A.book.scale()


def test_format_table_aligns_columns():
    text = A.book.format_table(["a", "bb"], [[1, 2], [333, 4]])
    assert text.splitlines() == ["  a  bb", "---  --", "  1   2", "333   4"]
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        A.book.format_table(["a", "b"], [[1]])


def test_within():
    assert A.book.within(0.9962, 0.996, 0.001)
    assert not A.book.within(0.98, 0.996, 0.001)
    assert not A.book.within(float("nan"), 0.996, 0.001)
    with pytest.raises(ValueError):
        A.book.within(1.0, 1.0, -1.0)


def test_claim_status_and_key_validation():
    assert A.book.claim("A3-test", 0.99861, ok=True) == "observed"            # the default kind
    assert A.book.claim("A3-test", 0.99861, ok=True, kind="reproduced") == "reproduced"
    assert A.book.claim("A3-test", "3 / 8", ok=False, kind="reproduced") == "differs"
    for kind in A.book.KINDS_OF_CLAIM:
        assert A.book.claim("k", 1.0, ok=True, kind=kind) == kind
        assert A.book.claim("k", 1.0, ok=False, kind=kind) == "differs"
    assert A.book.claim("k", 1.0, ok=True, kind="fitted", note="(n, T) best of 5") == "fitted"
    for bad in ("differs", "Reproduced", "", None, "equals"):
        with pytest.raises(ValueError, match="kind must be one of"):
            A.book.claim("k", 1.0, ok=True, kind=bad)
    with pytest.raises(TypeError, match="note"):
        A.book.claim("k", 1.0, ok=True, note=3)
    for bad in ("", "a:b", "a b", "a`b"):
        with pytest.raises(ValueError, match="claim key"):
            A.book.claim(bad, 1.0, ok=True)


def test_classify_selections_agrees_with_the_definitions():
    P = A.random_problem(2, 3, 2, generator=A.set_seed(3))
    kinds = A.maxmargin.classify_selections(P)
    assert len(kinds) == 9 and set(k for k, _ in kinds.values()) <= set(A.maxmargin.KINDS)
    opt = tuple(int(t) for t in P.opt)
    assert kinds[opt][0] in ("global", "infeasible")
    for alpha, (kind, result) in kinds.items():
        if kind == "infeasible":
            with pytest.raises(A.InfeasibleError):
                A.att_svm(P.X, P.Z, torch.tensor(alpha))
            continue
        local = bool(A.is_locally_optimal(P, torch.tensor(alpha), result).all())
        assert (kind in ("global", "locally optimal")) == (local or alpha == opt)


def test_classify_selections_rejects_batches_and_huge_counts():
    P = A.random_problem(2, 3, 2, trials=2, generator=A.set_seed(0))
    with pytest.raises(ValueError, match="one instance"):
        A.maxmargin.classify_selections(P)
    with pytest.raises(ValueError, match="selections is more than"):
        A.maxmargin.classify_selections(A.random_problem(20, 4, 2, generator=A.set_seed(0)))


def test_proportion_interval_is_wilson_and_contains_the_rate():
    low, high = A.book.proportion_interval(17, 100)
    assert abs(low - 0.1093) < 5e-4 and abs(high - 0.2552) < 5e-4     # Wilson 95%, by hand
    assert A.book.proportion_interval(0, 50)[0] == 0.0 and A.book.proportion_interval(0, 50)[1] > 0.05
    assert A.book.proportion_interval(50, 50)[1] == 1.0 and A.book.proportion_interval(50, 50)[0] < 0.95
    for count, total in ((1, 3), (250, 500), (499, 500)):
        low, high = A.book.proportion_interval(count, total)
        assert low < count / total < high


@pytest.mark.parametrize("args", [(-1, 10), (11, 10), (0, 0), (True, 3), (1.5, 3)])
def test_proportion_interval_bad_input(args):
    with pytest.raises((ValueError, TypeError)):
        A.book.proportion_interval(*args)


def _one_hot(alpha: torch.Tensor, T: int, top: float = 1.0) -> torch.Tensor:
    probs = torch.nn.functional.one_hot(alpha, T).to(torch.float64) * (top - (1 - top) / (T - 1))
    return probs + (1 - top) / (T - 1)


def test_run_outcomes_match_selection_kind_per_trial():
    P = A.random_problem(2, 3, 2, trials=9, generator=A.set_seed(5))
    alpha = torch.tensor([[a, b] for a in range(3) for b in range(3)])
    P = A.Problem.stack([P.trial(0)] * 9)                   # one instance, every selection
    probs = _one_hot(alpha, 3, top=0.999)
    probs[4] = _one_hot(alpha[4], 3, top=0.9)               # run 4 has not chosen yet
    chosen, kinds = A.maxmargin.run_outcomes(P, probs)
    assert torch.equal(chosen, alpha)
    reference = A.maxmargin.classify_selections(P.trial(0))
    for b in range(9):
        expected = reference[tuple(alpha[b].tolist())][0]
        assert kinds[b] == ("unsaturated" if b == 4 else expected)
        assert kinds[b] in A.maxmargin.OUTCOMES and kinds[b] != "infeasible"


def test_run_outcomes_bad_input():
    P = A.random_problem(2, 3, 2, trials=4, generator=A.set_seed(6))
    good = _one_hot(P.opt, 3, 0.999)
    for probs, message in ((good[:3], "shape"), (good.clone().fill_(float("nan")), "NaN"),):
        with pytest.raises(ValueError, match=message):
            A.maxmargin.run_outcomes(P, probs)
    with pytest.raises(ValueError, match="saturation"):
        A.maxmargin.run_outcomes(P, good, saturation=1.0)
    with pytest.raises(ValueError, match="one trials dimension"):
        A.maxmargin.run_outcomes(P.trial(0), good[0])
    with pytest.raises(TypeError):
        A.maxmargin.run_outcomes(P.X, good)


def test_format_share_writes_the_rate_and_its_wilson_interval():
    assert A.book.format_share(5, 20) == "0.250 [0.112, 0.469]"      # Wilson, by hand: (0.1119, 0.4687)
    low, high = A.book.proportion_interval(0, 7)
    assert A.book.format_share(0, 7) == f"0.000 [{low:.3f}, {high:.3f}]" and high > 0
    with pytest.raises(ValueError):
        A.book.format_share(3, 0)
