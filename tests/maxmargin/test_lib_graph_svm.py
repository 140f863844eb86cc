"""Next-token prediction with one self-attention layer and its Graph-SVM (attnsvm.graph_svm; ch08b)."""

import math

import numpy as np
import pytest
import torch

import attnsvm as A


def _data(pairs, vocab):
    return A.maxmargin.token_data(torch.tensor([s for s, _ in pairs]), torch.tensor([y for _, y in pairs]), vocab)


CHAIN = [([1, 2, 0], 1), ([2, 0, 0], 2)]                 # G^(0): 1 -> 2 -> 0 and 1 -> 0, acyclic
CYCLE = [([1, 2, 0], 1), ([1, 2, 0], 1), ([1, 2, 0], 2)]  # G^(0): 1 <-> 2, both -> 0


def test_graph_and_sccs_by_hand():
    data = _data(CHAIN + [([0, 1, 2], 0)], 3)
    g = A.maxmargin.priority_graphs(data)
    assert g[0].nonzero().tolist() == [[1, 0], [1, 2], [2, 0]]
    assert g[2].nonzero().tolist() == [[0, 1], [0, 2]]
    assert not bool(g[1].any())
    cyc = A.maxmargin.priority_sccs(_data(CYCLE, 3))[0]
    assert int(cyc[1]) == int(cyc[2]) != int(cyc[0])


def test_three_token_chain_solved_by_hand():
    """Column w = W e_0 with w1 - w2 >= 1, w2 - w0 >= 1 (w1 - w0 >= 1 then holds): the least norm
    point puts the three scores equally spaced around 0, w = (-1, 1, 0); the other columns are 0."""
    res = A.graph_svm(_data(CHAIN, 3))
    expected = torch.zeros(3, 3, dtype=torch.float64)
    expected[:, 0] = torch.tensor([-1.0, 1.0, 0.0])
    assert torch.allclose(res.W, expected, atol=1e-6)
    assert res.min_margin >= 1 - 1e-6 and res.max_tie == 0.0 and len(res.equal_edges) == 0


def test_acyclic_graph_svm_is_the_plain_att_svm():
    data = _data(CHAIN + [([0, 1, 2], 0), ([2, 1, 1], 2)], 3)
    assert all(len(set(A.maxmargin.priority_sccs(data)[k].tolist())) == 3 for k in range(3))
    graph, plain = A.graph_svm(data), A.graph_svm(data, within="margin")
    assert torch.allclose(graph.W, plain.W, atol=1e-6)
    assert torch.allclose(graph.W, A.graph_svm(data, within="free").W, atol=1e-6)


def test_cycle_ties_by_hand_and_plain_svm_names_the_cycle():
    """SCC {1, 2} of G^(0): w1 = w2, w1 - w0 >= 1: least norm w = (-2/3, 1/3, 1/3)."""
    data = _data(CYCLE, 3)
    res = A.graph_svm(data)
    assert torch.allclose(res.W[:, 0], torch.tensor([-2.0, 1.0, 1.0], dtype=torch.float64) / 3, atol=1e-6)
    assert res.max_tie <= 1e-6 and len(res.equal_edges) == 2
    with pytest.raises(A.InfeasibleError, match=r"last token 0 has the cycle 1 -> 2 -> 1"):
        A.graph_svm(data, within="margin")


def test_free_competitor_differs_when_ties_bind():
    data = _data([([1, 2, 0], 1), ([1, 2, 0], 2), ([1, 3, 0], 1), ([3, 4, 0], 3)], 5)
    graph, free = A.graph_svm(data), A.graph_svm(data, within="free")
    assert abs(float(graph.W[1, 0] - graph.W[2, 0])) < 1e-6
    assert float(free.W[1, 0] - free.W[2, 0]) > 0.1               # unequal without the tie
    assert float(free.W.norm()) < float(graph.W.norm()) - 1e-3     # fewer constraints, smaller norm


def test_loss_by_hand_and_closed_form_gradient_matches_autograd():
    data = _data(CYCLE + [([3, 1, 3], 1)], 4)
    assert float(A.studies.graph_loss(torch.zeros(4, 4), data)) == pytest.approx(math.log(3), abs=1e-15)
    W = torch.randn(4, 4, generator=A.set_seed(0), dtype=torch.float64).requires_grad_()
    (grad,) = torch.autograd.grad(A.studies.graph_loss(W, data), W)
    hist = A.studies.graph_gradient_descent(data, 1, 0.5, W0=W.detach(), log_steps=[0, 1])
    assert torch.allclose((hist.iterates[0] - hist.iterates[1]) / 0.5, grad, atol=1e-13)
    # repeated tokens count: [3, 1, 3] with label 1 has probability e^w1 / (e^w1 + 2 e^w3)
    lone = _data([([3, 1, 3], 1)], 4)
    Wn = W.detach()
    p = math.exp(Wn[1, 3]) / (math.exp(Wn[1, 3]) + 2 * math.exp(Wn[3, 3]))
    assert float(A.studies.graph_loss(Wn, lone)) == pytest.approx(-math.log(p), abs=1e-13)


def test_gd_keeps_scc_ties_and_converges_to_graph_svm_and_finite_part():
    """The symmetric cycle keeps exactly equal scores; with frequencies 2:1 the within-SCC gap tends
    to log 2 (W^fin), while the margin grows and the direction tends to the Graph-SVM."""
    sym = _data([([1, 2, 0], 1), ([1, 2, 0], 2)], 3)
    h = A.studies.graph_gradient_descent(sym, 200, 1.0)
    assert float((h.iterates[:, 1, 0] - h.iterates[:, 2, 0]).abs().max()) == 0.0
    data = _data(CYCLE, 3)
    fin = A.studies.graph_finite_part(data)
    assert float(fin[1, 0] - fin[2, 0]) == pytest.approx(math.log(2), abs=1e-10)
    assert float(A.studies.graph_project(fin, data)[1].norm()) < 1e-12       # W^fin lies in F
    svm = A.graph_svm(data)
    assert float(A.studies.graph_project(svm.W, data)[0].norm()) < 1e-6      # W^svm is orthogonal to F
    h = A.studies.graph_gradient_descent(data, 3000, 2.0, log_steps=[300, 3000])
    inside = A.studies.graph_project(h.iterates, data)[0]
    dist = (inside - fin).flatten(1).norm(dim=1)
    gaps = 1 - A.corr(h.iterates, svm.W, 1)
    assert float(dist[1]) < 0.5 * float(dist[0]) and float(dist[1]) < 1e-2
    assert float(gaps[1]) < float(gaps[0]) and float(gaps[1]) < 1e-2
    # what remains is mostly the finite part: removing it brings the direction much closer
    rest = 1 - A.corr(h.iterates[1] - fin, svm.W)
    assert float(rest) < 0.2 * float(gaps[1])
    margins = A.maxmargin.score_gaps(h.iterates, svm.margin_edges).min(-1).values
    assert float(margins[1]) > float(margins[0]) + 1.0


def test_batched_gd_matches_single_runs():
    data = _data(CYCLE + [([0, 1, 2], 2)], 3)
    W0 = torch.randn(3, 3, 3, generator=A.set_seed(1), dtype=torch.float64)
    batch = A.studies.graph_gradient_descent(data, 50, 1.0, W0=W0, log_steps=[50])
    for b in range(3):
        one = A.studies.graph_gradient_descent(data, 50, 1.0, W0=W0[b], log_steps=[50])
        assert torch.allclose(batch.iterates[0, b], one.iterates[0], atol=1e-14)
        assert float(batch.loss[0, b]) == pytest.approx(float(one.loss[0]), abs=1e-14)


def test_near_degenerate_margin_is_still_verified():
    """A long chain: the least-norm scores are equally spaced, every margin exactly 1."""
    K = 7
    pairs = [([i, i + 1, 0], i) for i in range(1, K - 1)] + [([K - 1, 0, 0], K - 1)]
    res = A.graph_svm(_data(pairs, K))
    w = res.W[:, 0].numpy()
    assert np.allclose(np.diff(w[1:]), -1.0, atol=1e-6)
    assert res.min_margin == pytest.approx(1.0, abs=1e-6)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="does not occur"):
        A.maxmargin.token_data([[1, 2, 0]], [3])
    with pytest.raises(TypeError, match="integer"):
        A.maxmargin.token_data([[1.0, 2.0]], [1])
    with pytest.raises(ValueError, match="within"):
        A.graph_svm(_data(CHAIN, 3), within="plain")


def test_one_scc_everywhere_gives_the_zero_solution_flagged():
    """The authors' manual_toy_case: every priority graph is one SCC, so no edge needs a margin; the
    Graph-SVM solution is W = 0 (flagged), and gradient descent converges to the finite part."""
    toks = torch.tensor([[0, 1, 2]] * 6 + [[2, 1, 0]] * 6)
    labels = torch.tensor([0, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0])
    data = A.maxmargin.token_data(toks, labels, 3)
    res = A.graph_svm(data)
    assert not res.has_direction and res.min_margin == math.inf and len(res.margin_edges) == 0
    assert float(res.W.abs().max()) == 0.0 and len(res.equal_edges) > 0
    assert A.graph_svm(data, within="free").has_direction is False
    run = A.studies.graph_gradient_descent(data, 3000, 2.0, log_steps=[3000])
    assert float((run.iterates[-1] - A.studies.graph_finite_part(data)).abs().max()) < 1e-8
    assert A.graph_svm(_data(CHAIN, 3)).has_direction


def test_batched_descent_equals_separate_runs():
    """Datasets of different n and T, run at once, give the iterates and losses of separate runs."""
    g = torch.Generator().manual_seed(3)
    datasets = []
    for n, T in ((4, 3), (7, 5), (5, 4)):
        toks = torch.randint(0, 5, (n, T), generator=g)
        labels = toks[torch.arange(n), torch.randint(0, T, (n,), generator=g)]
        datasets.append(A.maxmargin.token_data(toks, labels, 5))
    batch = A.studies.graph_gradient_descent_batch(datasets, 200, 2.0, log_steps=[0, 17, 200])
    assert batch.iterates.shape == (3, 3, 5, 5) and batch.loss.shape == (3, 3)
    for b, data in enumerate(datasets):
        one = A.studies.graph_gradient_descent(data, 200, 2.0, log_steps=[0, 17, 200])
        assert torch.allclose(batch.iterates[:, b], one.iterates, atol=1e-12, rtol=0)
        assert torch.allclose(batch.loss[:, b], one.loss, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="one vocab"):
        A.studies.graph_gradient_descent_batch([datasets[0], _data(CHAIN, 3)], 5, 1.0)
    with pytest.raises(ValueError, match="nonempty"):
        A.studies.graph_gradient_descent_batch([], 5, 1.0)
