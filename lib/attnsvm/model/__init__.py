"""The model and its training: problems, one-layer softmax attention, heads, risks, (normalized)
gradient descent and the regularization path.

- ``data``: :class:`Problem` (sequences X, queries Z, labels Y, head v), random and figure instances.
- ``models``: the attention parameterizations W, (K, Q), prompt p and diagonal, batched over trials.
- ``heads``: the prediction heads (linear, MLP, penalized), the losses, the empirical risk.
- ``gradients``: closed-form gradients, accurate under saturation; the optimal risk.
- ``train``: GD / NGD / sign descent (:func:`train`), its :class:`History`, frozen-run detection.
- ``path``: the regularization path (:func:`regularization_path`), solved on spheres of growing radius.
- ``metrics``: correlation, numerical rank, selected tokens, probabilities.
- ``utils``: seeds, devices, the default dtype.

Private modules (leading underscore) are implementation details: the path's descent, its start and
its provenance record, the training log, the step rules.

Layering: this subpackage imports nothing from :mod:`attnsvm.maxmargin`, :mod:`attnsvm.studies` or
:mod:`attnsvm.book`; every other subpackage may import it.
"""

from .data import Problem, figure_problem, random_problem
from .gradients import excess_risk, optimal_risk
from .heads import (LinearHead, LOSSES, MLPHead, PenalizedHead, attention_output, empirical_risk, predict)
from .metrics import (RANK_TOL, corr, is_global, max_probability, numerical_rank, probability_off, probability_on,
                      selected_tokens)
from .models import Attention, DiagonalAttention, KQAttention, PromptAttention, WAttention
from .path import PathResult, PathWarning, regularization_path
from .train import FrozenWarning, History, TrainingError, block_normalize, train
from .utils import DEFAULT_DTYPE, get_device, set_seed
__all__ = [
    "RANK_TOL",
    "Problem", "figure_problem", "random_problem", "excess_risk", "optimal_risk", "LinearHead",
    "LOSSES", "MLPHead", "PenalizedHead", "attention_output", "empirical_risk", "predict", "corr",
    "is_global", "max_probability", "numerical_rank", "probability_off", "probability_on",
    "selected_tokens", "Attention", "DiagonalAttention", "KQAttention", "PromptAttention",
    "WAttention", "PathResult", "PathWarning", "regularization_path", "FrozenWarning", "History",
    "TrainingError", "block_normalize", "train", "DEFAULT_DTYPE", "get_device", "set_seed",
]
