"""attnsvm.studies.a5: paper A's rank study, row by row against direct solves, and the same on any worker count."""

import math

import pytest
import torch

import attnsvm as A


def test_instances_are_seeded_by_the_setting_alone():
    P = A.studies.a5_instances(5, 5, 3)
    Q = A.random_problem(5, 5, 3, trials=100, generator=torch.Generator().manual_seed(50_503))
    assert torch.equal(P.X, Q.X) and torch.equal(P.Z, Q.Z) and torch.equal(P.opt, Q.opt)
    assert not torch.equal(P.X, A.studies.a5_instances(5, 5, 4).X[..., :3])


def test_rows_match_direct_solves():
    """Each field recomputed from att_svm / first_order_nuclear_svm on the same instance."""
    rows = A.studies.rank_rows(10, 5, 5, 4)
    P = A.studies.a5_instances(10, 5, 5)
    assert len(rows) == 4
    for b, row in enumerate(rows):
        pb = P.trial(b)
        try:
            fro = A.att_svm(pb.X, pb.Z, pb.opt, "fro")
        except A.InfeasibleError:
            assert not row.feasible and row.authors == 1 and row.fro is None
            continue
        nuc = A.att_svm(pb.X, pb.Z, pb.opt, "nuc")
        assert row.feasible and row.fro == fro.rank and row.nuc == nuc.rank
        assert row.fro_norm == pytest.approx(float(fro.W.norm()), rel=1e-12)
        assert row.n_support == int(fro.support.any(dim=1).sum())
        sigma = torch.linalg.svdvals(nuc.W)
        direct = math.inf if nuc.rank == 5 else float(sigma[nuc.rank - 1] / sigma[nuc.rank])
        # the study solves all instances in one batch: the dropped singular values are rounding
        # noise (~1e-13 relative) in both, so only a gap beyond 1e6 is asked of both, or equality
        assert (row.gap > 1e6 and direct > 1e6) or row.gap == pytest.approx(direct, rel=1e-3)
        W_fo = A.first_order_nuclear_svm(pb.X, pb.Z, pb.opt).W
        assert row.authors == int((torch.linalg.svdvals(W_fo) > A.studies.a5.AUTHORS_RANK_TOL).sum())
    assert sum(row.feasible for row in rows) >= 1


def test_ranks_obey_their_bounds_and_d1_is_infeasible():
    """rank W^mm <= min(n, d) and rank W^mm_* <= min(n, d) (W lives on span(Z) on the right); with
    d = 1 and T = 5 the optimal token of some example is almost surely not extreme: infeasible."""
    for n, T, d in [(5, 5, 3), (5, 10, 10)]:
        for row in A.studies.rank_rows(n, T, d, 5):
            if row.feasible:
                assert 1 <= row.fro <= min(n, d) and 1 <= row.nuc <= min(n, d)
                assert row.gap > 1
    assert not any(row.feasible for row in A.studies.rank_rows(5, 5, 1, 10))


def test_prefix_and_order_do_not_change_rows():
    assert A.studies.rank_rows(5, 5, 4, 3) == A.studies.rank_rows(5, 5, 4, 5)[:3]
    study = A.studies.a5_rank_study(((5, 5), (10, 5)), (4, 2), 2)
    assert list(study) == [(5, 5, 4), (5, 5, 2), (10, 5, 4), (10, 5, 2)]
    assert study[(10, 5, 2)] == A.studies.rank_rows(10, 5, 2, 2)


def test_two_workers_give_the_same_answers():
    settings, dims = ((5, 5), (5, 10)), (2, 5)
    assert A.studies.a5_rank_study(settings, dims, 3, workers=2) == A.studies.a5_rank_study(settings, dims, 3, workers=1)


def test_refuses_bad_input():
    with pytest.raises(ValueError, match="count"):
        A.studies.rank_rows(5, 5, 2, 101)
    with pytest.raises(ValueError, match="T must be at least 2"):
        A.studies.a5_instances(5, 1, 2)
    with pytest.raises(ValueError, match="workers"):
        A.studies.a5_rank_study(workers=0)
    with pytest.raises(ValueError, match="no setting"):
        A.studies.a5_rank_study((), (2,), 1)
