"""The max-margin problems attention converges to, and their solvers.

- ``svm``: Att-SVM for one selection (Definition "Att-SVM" of the book's chapter 1), batched over
  instances (:func:`att_svms`), its (K, Q) nuclear-norm variant, the prompt p-SVM, local optimality
  and feasibility of a selection.
- ``selections``: the kind of a selection (global, locally optimal, ...), batched over runs.
- ``reached``: which selection and SVM a trained attention reached (:func:`reached_svm`).
- ``nuclear``: the nuclear-norm Att-SVM* by a first-order method and its dual.
- ``gensvm``: the generalized SVM of several-token selections (nonlinear heads).
- ``normsvm``: Att-SVM under any matrix norm (the implicit bias of other optimizers).
- ``jointsvm``: the joint (v, p) problems of prompt attention.
- ``graph_svm``, ``next_token``: the SVMs of sequence-to-sequence and next-token prediction.
- ``duality``: KKT multipliers and constraint features; ``solution_set``: whether a solution is unique.
- ``svm_eq``: the equality-constrained least-norm fit.

Private modules: the shared solver core (cvxpy/Clarabel set-up, errors, reductions), the
interior-point nuclear solver and the lazy cvxpy import.

Layering: imports :mod:`attnsvm.model` only (never :mod:`attnsvm.studies` or :mod:`attnsvm.book`).
"""

from .duality import constraint_features, kkt_multipliers
from .gensvm import GenSVMResult, NoMarginError, finite_part, gen_svm, selected_sets
from .graph_svm import (GraphSVMResult, TokenData, graph_svm, priority_graphs, priority_sccs, score_gaps, token_data)
from .jointsvm import relaxed_p_svm, v_svm
from .next_token import (NTPData, NTPHistory, ntp_data, ntp_finite_part, ntp_gradient_descent,
                         ntp_gradient_descent_batch, ntp_loss, ntp_project, ntp_svm)
from .normsvm import matrix_norm, norm_svm
from .nuclear import FirstOrderNuclear, NuclearDual, first_order_nuclear_svm, nuclear_dual
from .reached import Reached, ReachedWarning, reached_svm
from .selections import (KINDS, OUTCOMES, SVMCache, classify_selections, run_outcomes, selection_kind, svm_stack)
from .solution_set import SolutionSetProbe, probe_solution_set
from .svm import SVMResult, att_svm, att_svm_feasible, att_svms, is_locally_optimal, p_svm
from ._svm_core import IllConditionedError, InfeasibleError
from .svm_eq import svm_eq_fit
__all__ = [
    "Reached", "ReachedWarning", "reached_svm",
    "constraint_features", "kkt_multipliers", "GenSVMResult", "finite_part", "gen_svm",
    "selected_sets", "GraphSVMResult", "TokenData", "graph_svm", "priority_graphs", "priority_sccs",
    "score_gaps", "token_data", "relaxed_p_svm", "v_svm", "NTPData", "NTPHistory", "ntp_data",
    "ntp_finite_part", "ntp_gradient_descent", "ntp_gradient_descent_batch", "ntp_loss",
    "ntp_project", "ntp_svm", "matrix_norm", "norm_svm", "FirstOrderNuclear", "NuclearDual",
    "first_order_nuclear_svm", "nuclear_dual", "KINDS", "OUTCOMES", "SVMCache",
    "classify_selections", "run_outcomes", "selection_kind", "svm_stack", "SolutionSetProbe",
    "probe_solution_set", "SVMResult", "att_svm", "att_svm_feasible", "att_svms",
    "is_locally_optimal", "p_svm", "IllConditionedError", "InfeasibleError", "NoMarginError", "svm_eq_fit",
]
