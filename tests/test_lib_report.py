"""The scale switch, the book's tables and claims, and selection classification."""

import pytest
import torch

import attnsvm as A


def test_scale_default_is_paper(monkeypatch):
    monkeypatch.delenv("ATTNSVM_SCALE", raising=False)
    assert A.scale() == "paper"
    assert A.at_scale(paper=100, quick=10) == 100


@pytest.mark.parametrize("value, expected", [("quick", 10), (" QUICK ", 10), ("paper", 100), ("", 100)])
def test_scale_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ATTNSVM_SCALE", value)
    assert A.at_scale(paper=100, quick=10) == expected


def test_unknown_scale_is_an_error(monkeypatch):
    monkeypatch.setenv("ATTNSVM_SCALE", "full")
    with pytest.raises(ValueError, match="ATTNSVM_SCALE='full' is not a scale"):
        A.scale()


def test_format_table_aligns_columns():
    text = A.format_table(["a", "bb"], [[1, 2], [333, 4]])
    assert text.splitlines() == ["  a  bb", "---  --", "  1   2", "333   4"]
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        A.format_table(["a", "b"], [[1]])


def test_within():
    assert A.within(0.9962, 0.996, 0.001)
    assert not A.within(0.98, 0.996, 0.001)
    assert not A.within(float("nan"), 0.996, 0.001)
    with pytest.raises(ValueError):
        A.within(1.0, 1.0, -1.0)


def test_claim_status_and_key_validation():
    assert A.claim("A3-test", 0.99861, ok=True) == "reproduced"
    assert A.claim("A3-test", "3 / 8", ok=False) == "differs"
    for bad in ("", "a:b", "a b", "a`b"):
        with pytest.raises(ValueError, match="claim key"):
            A.claim(bad, 1.0, ok=True)


def test_classify_selections_agrees_with_the_definitions():
    P = A.random_problem(2, 3, 2, generator=A.set_seed(3))
    kinds = A.classify_selections(P)
    assert len(kinds) == 9 and set(k for k, _ in kinds.values()) <= set(A.KINDS)
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
        A.classify_selections(P)
    with pytest.raises(ValueError, match="selections is more than"):
        A.classify_selections(A.random_problem(20, 4, 2, generator=A.set_seed(0)))
