"""What a regularization path starts from, and what it checks before it starts: the scaled
reference and the seeded random restarts of each radius, the radii, the cone, the trials shape, and
the tensor helpers they share with the descent (``attnsvm.model.path``, ``attnsvm.model._path_descent``)."""

from __future__ import annotations

import numpy as np
import torch

from .data import Problem
from .gradients import Evaluation
from .models import Attention, KQAttention, PromptAttention, WAttention
from .utils import as_tensor, broadcast_shape, check_generator, check_positive, check_seed


MAX_RESTARTS = 1000  # random starts per radius, at most


def _joint_norm(tensors: list[torch.Tensor], core: list[int]) -> torch.Tensor:
    squares = [t.flatten(t.ndim - k).pow(2).sum(-1) for t, k in zip(tensors, core)]
    return (squares[0] if len(squares) == 1 else torch.stack(squares).sum(0)).sqrt()


def _expand(per_trial: torch.Tensor, k: int) -> torch.Tensor:
    return per_trial.reshape(tuple(per_trial.shape) + (1,) * k)


def _reference_attention(attention: Attention, reference: torch.Tensor, R: float) -> Attention:
    """The reference direction scaled to the path's radius: ``R D / ||D||`` (nuclear norm for
    (K, Q), whose ball ``||K||^2 + ||Q||^2 <= 2R`` holds exactly the W with ``||W||_* <= R``)."""
    if isinstance(attention, KQAttention):
        return WAttention(R * reference / torch.linalg.matrix_norm(reference, "nuc")[..., None, None])
    if isinstance(attention, PromptAttention):
        return PromptAttention(R * reference / reference.norm(dim=-1, keepdim=True),
                               attention.key_matrix)
    return WAttention(R * reference / torch.linalg.matrix_norm(reference)[..., None, None])


def _reference_start(attention: Attention, scaled: torch.Tensor) -> list[torch.Tensor]:
    """Parameters of ``attention``'s kind whose combined value is ``scaled`` (balanced factors for
    (K, Q), truncated to the width m when ``scaled`` has a larger rank)."""
    if not isinstance(attention, KQAttention):
        return [scaled]
    m = attention.K.shape[-1]
    U, S, Vh = torch.linalg.svd(scaled)
    root = S[..., :m].sqrt().unsqueeze(-2)
    return [U[..., :m] * root, Vh.transpose(-1, -2)[..., :m] * root]


def _check_reference(reference, attention: Attention) -> torch.Tensor:
    shape = tuple(attention.combined().shape)
    k = attention.core_dims[0]
    reference = as_tensor(reference, "reference", dtype=attention.params[0].dtype,
                          device=attention.params[0].device)
    if reference.ndim < k or tuple(reference.shape[-k:]) != shape[-k:]:
        raise ValueError(f"reference has shape {tuple(reference.shape)}; it must end with "
                         f"{shape[-k:]}, the shape of the path's {attention.names[0]}")
    if bool((reference.flatten(reference.ndim - k).abs().amax(-1) == 0).any()):
        raise ValueError("reference must be a nonzero direction (e.g. an Att-SVM solution)")
    return reference


def _random_starts(params: list[torch.Tensor], core: list[int], count: int, rho: float,
                   generator: torch.Generator) -> list[torch.Tensor]:
    """``count`` Gaussian draws of every parameter, shape ``(count, *param.shape)``, scaled jointly
    onto the sphere of radius ``rho``; drawn in float64 on the generator's device, then moved."""
    draws = [torch.randn((count, *p.shape), generator=generator, dtype=torch.float64,
                         device=generator.device).to(p) for p in params]
    norm = _joint_norm(draws, core)
    return [d * _expand(rho / norm, k) for d, k in zip(draws, core)]


def _check_restarts(restarts) -> int:
    if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) \
            or not 0 <= restarts <= MAX_RESTARTS:
        raise ValueError(f"restarts must be an integer in [0, {MAX_RESTARTS}] (random starts per "
                         f"radius), got {restarts!r}")
    return int(restarts)


def _restart_generator(restarts: int, generator, seed) -> torch.Generator | None:
    """The generator the restarts draw from: ``generator``, or a CPU one seeded with ``seed``
    (0 by default)."""
    check_generator(generator)
    if seed is not None:
        check_seed(seed)
        if generator is not None:
            raise ValueError("give either generator or seed for the restarts, not both")
    if not restarts:
        return None
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(int(seed or 0))


def _match_trials(attention: Attention, problem: Problem, caller: str = "the path") -> Problem:
    """The problem with the parameters' trials shape (a problem without trials is repeated, as
    expanded views); ``ValueError`` when the problem has trials the parameters lack: parameters
    shared by several trials would be fitted to the sum of their losses."""
    p, k = attention.params[0], attention.core_dims[0]
    lead = tuple(p.shape[: p.ndim - k])
    if problem.batch_shape == lead:
        return problem
    full = broadcast_shape(lead, problem.batch_shape)     # check_compatible: they broadcast
    if full != lead:
        name = attention.names[0]
        raise ValueError(f"{caller} needs one set of parameters per trial: {name} has trials "
                         f"shape {lead} and the problem {problem.batch_shape} (one {name} shared "
                         f"by the trials would be fitted to the sum of their losses); give the "
                         f"parameters the problem's trials (e.g. {name}.expand(*{tuple(full)}, "
                         f"*{name}.shape[-{k}:]).clone(), or trials= when building them)")
    return _widen(problem, lead)


def _check_per_trial(evaluation: Evaluation, norm: torch.Tensor) -> None:
    if tuple(evaluation.risk.shape) != tuple(norm.shape):
        raise ValueError(f"the path needs one set of parameters per trial: the parameters have "
                         f"trials shape {tuple(norm.shape)} but the loss (through the head) has "
                         f"{tuple(evaluation.risk.shape)}; give the start the head's trials shape")


def _widen(problem: Problem, lead: tuple[int, ...]) -> Problem:
    """``problem`` with every array expanded (not copied) to the trials shape ``lead``."""
    n, T, d = problem.n, problem.T, problem.d
    mask = problem.mask
    if mask is not None and mask.ndim > 2:
        mask = mask.expand(*lead, n, T)
    v = problem.v if problem.v.ndim == 1 else problem.v.expand(*lead, d)
    return Problem(problem.X.expand(*lead, n, T, d), problem.Y.expand(*lead, n),
                   problem.Z.expand(*lead, n, d), v, mask)


def _check_radii(radii) -> torch.Tensor:
    radii = as_tensor(radii, "radii", dtype=torch.float64)
    if radii.ndim != 1 or len(radii) == 0 or bool((radii <= 0).any()) or bool((radii.diff() < 0).any()):
        raise ValueError("radii must be a non-empty increasing sequence of positive numbers")
    return radii


def _check_cone(cone, attention: Attention) -> tuple[torch.Tensor, float]:
    if isinstance(attention, KQAttention):
        raise ValueError("the cone constraint is defined for the W and p parameterizations")
    if not isinstance(cone, (tuple, list)) or len(cone) != 2:
        raise TypeError("cone must be a pair (D, mu): a direction and a width")
    core = attention.core_dims[0]
    direction = as_tensor(cone[0], "the cone's direction", dtype=attention.params[0].dtype,
                          device=attention.params[0].device)
    if tuple(direction.shape[-core:]) != tuple(attention.params[0].shape[-core:]) or \
            direction.ndim < core:
        raise ValueError(f"the cone's direction has shape {tuple(direction.shape)}, the "
                         f"parameter {tuple(attention.params[0].shape)}")
    if bool((direction.flatten(direction.ndim - core).abs().amax(-1) == 0).any()):
        raise ValueError("the cone's direction must be nonzero")
    mu = check_positive(cone[1], "the cone's mu", upper=2.0)
    return direction, mu
