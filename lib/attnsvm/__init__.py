"""attnsvm: attention as a max-margin token selector.

A small PyTorch library behind the attnsvm book: problem instances, one-layer softmax attention in
the W, (K, Q) and p parameterizations, the Att-SVM problems, (normalized) gradient descent and the
regularization path, batched over trials, on CPU or a CUDA GPU. References: Tarzanagh, Li,
Thrampoulidis, Oymak, "Transformers as Support Vector Machines" (2023) and Tarzanagh, Li, Zhang,
Oymak, "Max-Margin Token Selection in Attention Mechanism" (NeurIPS 2023).

This namespace holds the core a user needs (the book's page "Using attnsvm on your own data" walks
through it). The rest lives in four subpackages, layered so that none imports a layer above it:

- :mod:`attnsvm.model`: the model and its training (problems, attention, heads, risks, training,
  the regularization path, metrics);
- :mod:`attnsvm.maxmargin`: the max-margin problems and their solvers (imports ``model``);
- :mod:`attnsvm.book`: the book's claims, tables, scale switch and plot style (imports ``model``);
- :mod:`attnsvm.studies`: the book's experiments (imports the three above).
"""

from . import book, maxmargin, model, studies
from .maxmargin import (IllConditionedError, InfeasibleError, Reached, SVMResult, att_svm, att_svm_feasible, att_svms,
                        first_order_nuclear_svm, gen_svm, graph_svm, is_locally_optimal, norm_svm, ntp_svm,
                        p_svm, reached_svm, selection_kind)
from .model import (DEFAULT_DTYPE, RANK_TOL, LOSSES, Attention, FrozenWarning, History, KQAttention, LinearHead, MLPHead,
                    PathResult, PathWarning, Problem, PromptAttention, TrainingError, WAttention,
                    attention_output, corr, empirical_risk, excess_risk, figure_problem, get_device,
                    max_probability, numerical_rank, predict, random_problem, regularization_path,
                    selected_tokens, set_seed, train)

__version__ = "0.1.0"

__all__ = [
    # the model and its training
    "Problem", "random_problem", "figure_problem",
    "Attention", "WAttention", "KQAttention", "PromptAttention",
    "LinearHead", "MLPHead", "LOSSES", "attention_output", "predict", "empirical_risk", "excess_risk",
    "train", "History", "TrainingError", "FrozenWarning",
    "regularization_path", "PathResult", "PathWarning",
    "corr", "numerical_rank", "RANK_TOL", "selected_tokens", "max_probability",
    "set_seed", "get_device", "DEFAULT_DTYPE",
    # the max-margin problems
    "att_svm", "att_svms", "p_svm", "SVMResult", "InfeasibleError", "IllConditionedError",
    "is_locally_optimal", "att_svm_feasible", "selection_kind", "reached_svm", "Reached",
    "gen_svm", "norm_svm", "first_order_nuclear_svm", "ntp_svm", "graph_svm",
    # the subpackages
    "model", "maxmargin", "studies", "book",
    "__version__",
]
