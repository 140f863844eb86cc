"""Next-token prediction with one self-attention layer, and its Graph-SVM (Li, Huang, Ildiz, Rawat,
Oymak, "Mechanics of next token prediction with self-attention", AISTATS 2024; book page ch08b).

A training set is ``n`` token sequences ``tokens (n, T)`` over a vocabulary of ``K`` tokens, each
with its next token ``labels (n,)``. Tokens are embedded by orthonormal vectors; we take
``e_1, ..., e_K`` (``d = K``: any orthonormal embedding is a rotation of this one, which keeps norms
and correlations). The *last* token ``k`` of a sequence is the query: token ``j`` gets the logit
``e_j^T W e_k = W[j, k]``, the attention output is the convex combination ``X^T S(X W e_k)`` of the
embeddings, and (as in the authors' code, repository ``yixiao-huang/next-token-prediction``,
``train_utils.get_loss``) the probability of the next token ``y`` is the attention mass on the
copies of ``y``, trained with the log-loss
``L(W) = -(1/n) sum_s log(e_y^T X_s^T S(X_s W e_k))``; the label must occur in its sequence.

- The token-priority graph ``G^(k)`` of last token ``k`` has an edge ``i -> j`` when some sequence
  ending in ``k`` contains ``j != i`` and has next token ``i`` (:func:`priority_graphs`); its
  strongly connected components (SCCs, :func:`priority_sccs`) order the tokens.
- The Graph-SVM (:func:`graph_svm`): ``min ||W||_F`` s.t. for every ``k`` and edge ``i -> j`` of
  ``G^(k)``, ``(e_i - e_j)^T W e_k = 0`` if ``i, j`` share an SCC and ``>= 1`` otherwise.
- The paper proves that gradient descent converges in direction to the Graph-SVM solution, and that
  its component in the subspace of within-SCC score differences converges to a finite ``W^fin``:
  the descent, the loss and the finite part are in :mod:`attnsvm.studies.graph_descent`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import torch

from ._cvxpy import cp
from ._svm_core import InfeasibleError
from ..model.utils import DEFAULT_DTYPE, as_array, check_count

WITHIN = ("equal", "free", "margin")   # within-SCC edges: = 0 (Graph-SVM), unconstrained, >= 1
TOLERANCE = 1e-6                       # the solution must meet every constraint to this accuracy


@dataclass(frozen=True)
class TokenData:
    """Checked next-token data: ``tokens (n, T)`` and ``labels (n,)`` (int64) over ``vocab`` tokens."""

    tokens: torch.Tensor
    labels: torch.Tensor
    vocab: int

    @property
    def queries(self) -> torch.Tensor:
        """The last token of each sequence, ``(n,)``."""
        return self.tokens[:, -1]

    @property
    def counts(self) -> torch.Tensor:
        """``(n, K)`` float64: how often each token occurs in each sequence."""
        counts = torch.zeros(self.tokens.shape[0], self.vocab, dtype=DEFAULT_DTYPE)
        return counts.scatter_add_(1, self.tokens, torch.ones_like(self.tokens, dtype=DEFAULT_DTYPE))


def token_data(tokens, labels, vocab: int | None = None) -> TokenData:
    """Check and package next-token data. ``tokens (n, T)`` and ``labels (n,)`` are integer token ids
    in ``[0, vocab)`` (``vocab`` defaults to the largest id + 1). Raises ``ValueError`` for wrong
    shapes, non-integer or out-of-range ids, or a label that does not occur in its sequence (the
    model can only predict a token it attends to)."""
    tokens, labels = as_array(tokens, "tokens"), as_array(labels, "labels")
    for name, value in (("tokens", tokens), ("labels", labels)):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer token ids, got dtype {value.dtype}")
    if tokens.ndim != 2 or labels.ndim != 1 or labels.shape[0] != tokens.shape[0]:
        raise ValueError(f"tokens must be (n, T) and labels (n,) with the same n; got "
                         f"{tuple(tokens.shape)} and {tuple(labels.shape)}")
    check_count(tokens.shape[0], "the number of sequences n", 1)
    check_count(tokens.shape[1], "the sequence length T", 1)
    tokens, labels = tokens.to(torch.int64), labels.to(torch.int64)
    top = int(max(tokens.max(), labels.max()))
    vocab = top + 1 if vocab is None else check_count(vocab, "vocab", 2)
    if int(min(tokens.min(), labels.min())) < 0 or top >= vocab:
        raise ValueError(f"token ids must lie in [0, vocab) = [0, {vocab}); got ids from "
                         f"{int(min(tokens.min(), labels.min()))} to {top}")
    missing = (tokens != labels[:, None]).all(1).nonzero().flatten()
    if len(missing):
        s = int(missing[0])
        raise ValueError(f"the label {int(labels[s])} of sequence {s} does not occur in it "
                         f"({tokens[s].tolist()}): attention can only retrieve input tokens; drop "
                         f"the {len(missing)} such sequence(s)")
    return TokenData(tokens, labels, vocab)


def _data(data) -> TokenData:
    if not isinstance(data, TokenData):
        raise TypeError(f"data must be the TokenData returned by token_data, got {type(data).__name__}")
    return data


def priority_graphs(data: TokenData) -> torch.Tensor:
    """``(K, K, K)`` bool: ``[k, i, j]`` is the edge ``i -> j`` of the token-priority graph of last
    token ``k`` (a sequence ending in ``k`` contains ``j != i`` and is followed by ``i``)."""
    data = _data(data)
    K = data.vocab
    graphs = torch.zeros(K, K, K, dtype=torch.bool)
    rows = data.queries[:, None].expand_as(data.tokens)
    graphs[rows, data.labels[:, None].expand_as(data.tokens), data.tokens] = True
    graphs[:, torch.arange(K), torch.arange(K)] = False
    return graphs


def priority_sccs(data: TokenData) -> torch.Tensor:
    """``(K, K)`` int64: ``[k, i]`` labels the strongly connected component of token ``i`` in
    ``G^(k)`` (``scipy.sparse.csgraph.connected_components``, ``connection="strong"``)."""
    graphs = priority_graphs(data).numpy()
    labels = [scipy.sparse.csgraph.connected_components(scipy.sparse.csr_matrix(g), directed=True,
                                                        connection="strong")[1] for g in graphs]
    return torch.from_numpy(np.stack(labels).astype(np.int64))


def _cycle(graph: np.ndarray, members: np.ndarray) -> list[int]:
    """A directed cycle through ``members[0]`` inside one SCC (breadth-first search back to it)."""
    start, inside = int(members[0]), set(members.tolist())
    parent, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for a in frontier:
            for b in np.flatnonzero(graph[a]).tolist():
                if b == start:
                    path = [a]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1] + [start]
                if b in inside and b not in parent:
                    parent[b] = a
                    nxt.append(b)
        frontier = nxt
    raise AssertionError("an SCC with two tokens always has a cycle")      # pragma: no cover


@dataclass(frozen=True)
class GraphSVMResult:
    """A Graph-SVM solution: ``W (K, K)``; the edges ``[k, i, j]`` constrained to ``= 0``
    (``equal_edges``) and to ``>= 1`` (``margin_edges``); the smallest margin and the largest
    equal-edge gap it attains (checked against :data:`TOLERANCE`). ``has_direction`` is False when
    no edge is a margin edge (every priority graph is one SCC, or has no edge, as in the authors'
    ``manual_toy_case``): then ``W = 0``, ``min_margin = inf``, and gradient descent has no
    direction to grow along (its iterates converge to a finite point, :func:`graph_finite_part`)."""

    W: torch.Tensor
    within: str
    equal_edges: torch.Tensor
    margin_edges: torch.Tensor
    min_margin: float
    max_tie: float
    has_direction: bool


def score_gaps(W, edges) -> torch.Tensor:
    """``(e_i - e_j)^T W e_k`` for each row ``[k, i, j]`` of ``edges (m, 3)``; ``W (..., K, K)``
    (a stack of iterates gives ``(..., m)``)."""
    W = as_array(W, "W").to(DEFAULT_DTYPE)
    edges = as_array(edges, "edges")
    if W.ndim < 2 or W.shape[-1] != W.shape[-2]:
        raise ValueError(f"W must be (..., K, K), got shape {tuple(W.shape)}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("W has NaN/inf entries")
    if edges.is_floating_point() or edges.ndim != 2 or edges.shape[1] != 3:
        raise ValueError(f"edges must be an (m, 3) integer array of [k, i, j], got {tuple(edges.shape)} "
                         f"{edges.dtype}")
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= W.shape[-1]):
        raise ValueError(f"edge token ids must lie in [0, K) = [0, {W.shape[-1]})")
    k, i, j = edges.T.long()
    return W[..., i, k] - W[..., j, k]


def graph_svm(data: TokenData, within: str = "equal") -> GraphSVMResult:
    """The Graph-SVM of the data (``within="equal"``), solved by cvxpy/Clarabel and verified (every
    constraint met to :data:`TOLERANCE`). Two competitors for the book: ``"free"`` drops the
    within-SCC equalities (keeps only the cross-SCC margins), ``"margin"`` asks margin 1 on every
    edge (the Att-SVM of the label tokens, blind to the SCCs). Raises :class:`InfeasibleError`
    naming a blocking cycle when ``"margin"`` meets one, ``ValueError`` when the solver fails.
    When no edge joins two SCCs the solution is ``W = 0``, returned flagged ``has_direction=False``.
    The constraints are those of the authors' ``W_svm_solver_cvxpy`` (repository
    ``yixiao-huang/next-token-prediction``): ``= 0`` inside the label's SCC, ``<= -1`` across."""
    data = _data(data)
    if within not in WITHIN:
        raise ValueError(f"within must be one of {WITHIN}, got {within!r}")
    graphs, sccs = priority_graphs(data), priority_sccs(data)
    K = data.vocab
    edges = graphs.nonzero()                                     # rows [k, i, j]
    same = sccs[edges[:, 0], edges[:, 1]] == sccs[edges[:, 0], edges[:, 2]]
    if within == "margin" and bool(same.any()):
        k, i = (int(x) for x in edges[same][0, :2])
        members = np.flatnonzero(sccs[k].numpy() == int(sccs[k, i]))
        members = np.r_[i, members[members != i]]
        cycle = " -> ".join(map(str, _cycle(graphs[k].numpy(), members)))
        raise InfeasibleError(f"margin 1 on every edge is infeasible: the priority graph of last token "
                              f"{k} has the cycle {cycle} (a strongly connected component); use "
                              f"within='equal' (the Graph-SVM)")
    equal = edges[same] if within == "equal" else edges[:0]
    margin = edges if within == "margin" else edges[~same]
    if len(margin) == 0:                                         # nothing to separate: W = 0 is optimal
        return GraphSVMResult(torch.zeros(K, K, dtype=DEFAULT_DTYPE), within, equal, margin,
                              float("inf"), 0.0, has_direction=False)
    w = cp.Variable(K * K)
    rows = lambda e: scipy.sparse.csr_matrix(                    # noqa: E731  (row: +e_i e_k^T - e_j e_k^T)
        (np.r_[np.ones(len(e)), -np.ones(len(e))],
         (np.r_[np.arange(len(e)), np.arange(len(e))], np.r_[e[:, 1] * K + e[:, 0], e[:, 2] * K + e[:, 0]])),
        shape=(len(e), K * K))
    constraints = [rows(margin.numpy()) @ w >= 1]
    if len(equal):
        constraints.append(rows(equal.numpy()) @ w == 0)
    problem = cp.Problem(cp.Minimize(cp.sum_squares(w)), constraints)
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as error:
        raise ValueError(f"the Graph-SVM solver failed ({error})") from error
    if problem.status == cp.INFEASIBLE:
        raise InfeasibleError("the Graph-SVM is infeasible")         # pragma: no cover (one-hot tokens)
    if w.value is None or problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ValueError(f"the Graph-SVM solver did not converge (status {problem.status})")
    W = torch.from_numpy(np.asarray(w.value).reshape(K, K))
    min_margin = float(score_gaps(W, margin).min())
    max_tie = float(score_gaps(W, equal).abs().max()) if len(equal) else 0.0
    if min_margin < 1 - TOLERANCE or max_tie > TOLERANCE:
        raise ValueError(f"the Graph-SVM solution misses its constraints (smallest margin {min_margin:.2e}, "
                         f"largest equal-edge gap {max_tie:.2e}; tolerance {TOLERANCE:g})")
    return GraphSVMResult(W, within, equal, margin, min_margin, max_tie, has_direction=True)


