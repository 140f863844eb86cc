"""attnsvm: attention as a max-margin token selector.

A small PyTorch library behind the attnsvm book: problem instances, one-layer softmax attention in
the W, (K, Q) and p parameterizations, the Att-SVM problems, (normalized) gradient descent and the
regularization path, batched over trials. References: Tarzanagh, Li, Thrampoulidis, Oymak,
"Transformers as Support Vector Machines" (2023) and Tarzanagh, Li, Zhang, Oymak, "Max-Margin Token
Selection in Attention Mechanism" (NeurIPS 2023).
"""

from .a4 import (A4Comparison, A4_D, A4_PAPER, a4_budgets, a4_compare, a4_grid, a4_runs, a4_seed,
                 ngd_outcomes, opt_feasible, outcome_counts, outcomes_by_threshold, seeded_instances)
from .a5 import A5_D, A5_INSTANCES, A5_SETTINGS, RankRow, a5_instances, a5_rank_study, rank_rows
from .a6 import A6Study, a6_study, attention_probabilities, gen_svm_violation
from .basin import (TrapInstance, angle_between, basin_labels, basin_map, empirical_cones,
                    initial_gradient_norms, local_trap_instance, polar_starts, repeat_instance)
from .data import Problem, figure_problem, random_problem
from .digits import (TranslatedDigits, digit_patches, logistic_cv_accuracy, patch_tokens, place_on_canvas,
                     translated_digits)
from .duality import constraint_features, kkt_multipliers
from .fit import (NormSVMCache, accuracy, attention_entropy, logit_gaps, margin_ratio, smallest_margin,
                  train_recorded, train_until_gap)
from .gensvm import GenSVMResult, finite_part, gen_svm, selected_sets
from .gradients import excess_risk, optimal_risk
from .graph_descent import (GraphHistory, graph_finite_part, graph_gradient_descent,
                            graph_gradient_descent_batch, graph_loss, graph_project)
from .graph_svm import (GraphSVMResult, TokenData, graph_svm, priority_graphs, priority_sccs, score_gaps,
                        token_data)
from .heads import LOSSES, LinearHead, MLPHead, PenalizedHead, attention_output, empirical_risk, predict
from .jointsvm import relaxed_p_svm, v_svm
from .linear_bias import (LINEAR_METHODS, LinearDescent, LinearMaxMargin, linear_descent, linear_margin,
                          linear_max_margin, separable_data)
from .metrics import (corr, is_global, max_probability, numerical_rank, probability_off, probability_on,
                      selected_tokens)
from .models import Attention, DiagonalAttention, KQAttention, PromptAttention, WAttention
from .next_token import (NTPData, NTPHistory, ntp_data, ntp_finite_part, ntp_gradient_descent,
                         ntp_gradient_descent_batch, ntp_loss, ntp_project, ntp_svm)
from .normsvm import matrix_norm, norm_svm
from .nuclear import FirstOrderNuclear, NuclearDual, first_order_nuclear_svm, nuclear_dual
from .path import PathResult, PathWarning, regularization_path
from .path_study import (CANDIDATE_KINDS, GlobalPath, c_star_margin, candidate_directions, dip, excess_loss,
                         global_path, limit_offset, random_starts, selection_table)
from .prompt import (B_KEY_MATRIX, OFFSET_LOSSES, b1_problem, b2_problem, b4_offset, b4_problem,
                     first_crossing, first_departure, log_growth_rate, logistic_offset_turns,
                     saturation_onset, selected_probability, selected_term_error)
from .prompt_joint import authors_joint_ngd, b3_problem, joint_ngd, label_probability, mixed_label_margin
from .reluhead import a6_draw, ngd_relu_head, span_iterates
from .report import KINDS_OF_CLAIM, claim, format_share, format_table, proportion_interval, within
from .scale import at_scale, scale
from .selections import (KINDS, OUTCOMES, SVMCache, classify_selections, run_outcomes, selection_kind,
                         svm_stack)
from .sequences import (causal_pairs_separable, cover_fraction, ngd_until_gap, random_sequences,
                        self_attention_reference, separable_through_origin, smallest_logit_gaps)
from .solution_set import SolutionSetProbe, probe_solution_set
from .svm import SVMResult, att_svm, att_svm_feasible, att_svms, is_locally_optimal, p_svm
from .svm_core import IllConditionedError, InfeasibleError
from .svm_eq import svm_eq_fit
from .train import FrozenWarning, History, TrainingError, block_normalize, train
from .utils import DEFAULT_DTYPE, get_device, set_seed

__version__ = "0.1.0"

__all__ = [
    "A4Comparison", "A4_D", "A4_PAPER", "a4_budgets", "a4_compare", "a4_grid", "a4_runs", "a4_seed",
    "ngd_outcomes", "opt_feasible", "outcome_counts", "outcomes_by_threshold", "seeded_instances",
    "A5_D", "A5_INSTANCES", "A5_SETTINGS", "RankRow", "a5_instances", "a5_rank_study", "rank_rows",
    "A6Study", "a6_study", "attention_probabilities", "gen_svm_violation",
    "TrapInstance", "angle_between", "basin_labels", "basin_map", "empirical_cones",
    "initial_gradient_norms", "local_trap_instance", "polar_starts", "repeat_instance",
    "Problem", "figure_problem", "random_problem",
    "TranslatedDigits", "digit_patches", "logistic_cv_accuracy", "patch_tokens", "place_on_canvas",
    "translated_digits",
    "constraint_features", "kkt_multipliers",
    "NormSVMCache", "accuracy", "attention_entropy", "logit_gaps", "margin_ratio", "smallest_margin",
    "train_recorded", "train_until_gap",
    "GenSVMResult", "finite_part", "gen_svm", "selected_sets",
    "excess_risk", "optimal_risk",
    "GraphHistory", "graph_finite_part", "graph_gradient_descent", "graph_gradient_descent_batch",
    "graph_loss", "graph_project",
    "GraphSVMResult", "TokenData", "graph_svm", "priority_graphs", "priority_sccs", "score_gaps",
    "token_data",
    "LOSSES", "LinearHead", "MLPHead", "PenalizedHead", "attention_output", "empirical_risk", "predict",
    "relaxed_p_svm", "v_svm",
    "LINEAR_METHODS", "LinearDescent", "LinearMaxMargin", "linear_descent", "linear_margin",
    "linear_max_margin", "separable_data",
    "corr", "is_global", "max_probability", "numerical_rank", "probability_off", "probability_on",
    "selected_tokens",
    "Attention", "DiagonalAttention", "KQAttention", "PromptAttention", "WAttention",
    "NTPData", "NTPHistory", "ntp_data", "ntp_finite_part", "ntp_gradient_descent",
    "ntp_gradient_descent_batch", "ntp_loss", "ntp_project", "ntp_svm",
    "matrix_norm", "norm_svm",
    "FirstOrderNuclear", "NuclearDual", "first_order_nuclear_svm", "nuclear_dual",
    "PathResult", "PathWarning", "regularization_path",
    "CANDIDATE_KINDS", "GlobalPath", "c_star_margin", "candidate_directions", "dip", "excess_loss",
    "global_path", "limit_offset", "random_starts", "selection_table",
    "B_KEY_MATRIX", "OFFSET_LOSSES", "b1_problem", "b2_problem", "b4_offset", "b4_problem",
    "first_crossing", "first_departure", "log_growth_rate", "logistic_offset_turns", "saturation_onset",
    "selected_probability", "selected_term_error",
    "authors_joint_ngd", "b3_problem", "joint_ngd", "label_probability", "mixed_label_margin",
    "a6_draw", "ngd_relu_head", "span_iterates",
    "KINDS_OF_CLAIM", "claim", "format_share", "format_table", "proportion_interval", "within",
    "at_scale", "scale",
    "KINDS", "OUTCOMES", "SVMCache", "classify_selections", "run_outcomes", "selection_kind", "svm_stack",
    "causal_pairs_separable", "cover_fraction", "ngd_until_gap", "random_sequences",
    "self_attention_reference", "separable_through_origin", "smallest_logit_gaps",
    "SolutionSetProbe", "probe_solution_set",
    "SVMResult", "att_svm", "att_svm_feasible", "att_svms", "is_locally_optimal", "p_svm",
    "IllConditionedError", "InfeasibleError",
    "svm_eq_fit",
    "FrozenWarning", "History", "TrainingError", "block_normalize", "train",
    "DEFAULT_DTYPE", "get_device", "set_seed",
    "__version__",
]
