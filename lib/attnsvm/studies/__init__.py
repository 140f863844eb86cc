"""The book's experiments: each builds the instances of one study, runs it and returns its counts.

- ``a4``, ``a5``, ``a6``: paper A's experiments A4 (where GD goes), A5 (rank of W vs (K, Q)) and A6
  (multi-token selection with an MLP head); ``reluhead``: the closed-form trainer of A6.
- ``basin``: basins of attraction and the local trap instances of chapter 4.
- ``path_study``: the global path of chapter 2 (candidate directions, C* margin, random starts).
- ``prompt``, ``prompt_joint``: paper B's B1-B4 instances and their measurements (chapter 7).
- ``sequences``, ``fit``: the sequence models of chapter 8 and the fit loops and measurements of
  chapters 8-9; ``graph_descent``: gradient descent on the graph (seq2seq) loss.
- ``linear_bias``: the implicit bias of optimizers on linear models (chapter 9).
- ``digits``: translated digits on a canvas (chapter 10).

Layering: may import :mod:`attnsvm.model`, :mod:`attnsvm.maxmargin` and :mod:`attnsvm.book`;
nothing in the library imports it, except the top-level package that makes it reachable as
``attnsvm.studies``.
"""

from .a4 import (A4_D, A4_PAPER, A4Comparison, a4_budgets, a4_compare, a4_grid, a4_runs, a4_seed, ngd_outcomes,
                 outcome_counts, outcomes_by_threshold, seeded_instances)
from .a5 import A5_D, A5_INSTANCES, A5_SETTINGS, RankRow, a5_instances, a5_rank_study, rank_rows
from .a6 import A6Runs, A6Study, a6_study, attention_probabilities, gen_svm_violation
from .basin import (TrapInstance, angle_between, basin_labels, basin_map, empirical_cones, initial_gradient_norms,
                    local_trap_instance, polar_starts, repeat_instance)
from .digits import (TranslatedDigits, digit_patches, logistic_cv_accuracy, patch_tokens, place_on_canvas,
                     translated_digits)
from .fit import (NormSVMCache, accuracy, attention_entropy, logit_gaps, margin_ratio, smallest_margin,
                  train_recorded, train_until_gap)
from .graph_descent import (GraphHistory, graph_finite_part, graph_gradient_descent, graph_gradient_descent_batch,
                            graph_loss, graph_project)
from .linear_bias import (LINEAR_METHODS, LinearDescent, LinearMaxMargin, linear_descent, linear_margin,
                          linear_max_margin, separable_data)
from .path_study import (CANDIDATE_KINDS, GlobalPath, c_star_margin, candidate_directions, dip, excess_loss,
                         global_path, limit_offset, random_starts, selection_table)
from .prompt import (B_KEY_MATRIX, OFFSET_LOSSES, b1_problem, b2_problem, b4_offset, b4_problem, first_crossing,
                     first_departure, log_growth_rate, logistic_offset_turns, saturation_onset,
                     selected_probability, selected_term_error)
from .prompt_joint import (authors_joint_ngd, b3_problem, joint_ngd, label_probability, mixed_label_margin)
from .reluhead import a6_draw, ngd_relu_head, span_iterates
from .sequences import (causal_pairs_separable, cover_fraction, ngd_until_gap, random_sequences,
                        self_attention_reference, separable_through_origin, smallest_logit_gaps)
__all__ = [
    "A4_D", "A4_PAPER", "A4Comparison", "a4_budgets", "a4_compare", "a4_grid", "a4_runs", "a4_seed",
    "ngd_outcomes", "outcome_counts", "outcomes_by_threshold", "seeded_instances",
    "A5_D", "A5_INSTANCES", "A5_SETTINGS", "RankRow", "a5_instances", "a5_rank_study", "rank_rows",
    "A6Runs", "A6Study", "a6_study", "attention_probabilities", "gen_svm_violation", "TrapInstance",
    "angle_between", "basin_labels", "basin_map", "empirical_cones", "initial_gradient_norms",
    "local_trap_instance", "polar_starts", "repeat_instance", "TranslatedDigits", "digit_patches",
    "logistic_cv_accuracy", "patch_tokens", "place_on_canvas", "translated_digits", "NormSVMCache",
    "accuracy", "attention_entropy", "logit_gaps", "margin_ratio", "smallest_margin",
    "train_recorded", "train_until_gap", "GraphHistory", "graph_finite_part",
    "graph_gradient_descent", "graph_gradient_descent_batch", "graph_loss", "graph_project",
    "LINEAR_METHODS", "LinearDescent", "LinearMaxMargin", "linear_descent", "linear_margin",
    "linear_max_margin", "separable_data", "CANDIDATE_KINDS", "GlobalPath", "c_star_margin",
    "candidate_directions", "dip", "excess_loss", "global_path", "limit_offset", "random_starts",
    "selection_table", "B_KEY_MATRIX", "OFFSET_LOSSES", "b1_problem", "b2_problem", "b4_offset",
    "b4_problem", "first_crossing", "first_departure", "log_growth_rate", "logistic_offset_turns",
    "saturation_onset", "selected_probability", "selected_term_error", "authors_joint_ngd",
    "b3_problem", "joint_ngd", "label_probability", "mixed_label_margin", "a6_draw",
    "ngd_relu_head", "span_iterates", "causal_pairs_separable", "cover_fraction", "ngd_until_gap",
    "random_sequences", "self_attention_reference", "separable_through_origin",
    "smallest_logit_gaps",
]
