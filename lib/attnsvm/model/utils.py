"""Seeds, devices, dtypes and input validation shared by every module.

Theory experiments run in float64 by default (the numerics appendix: float32 saturates the softmax and
freezes the direction long before the theorems' limits are visible).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

DEFAULT_DTYPE = torch.float64
SEED_LIMIT = 2 ** 32         # torch's CPU generator and NumPy use 32 bits of a seed: a larger seed
                            # would give the run of a smaller one, so it is refused


def set_seed(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch, and return a CPU ``torch.Generator`` seeded with ``seed``.

    One seed per experiment: pass the returned generator to the data generators so that a notebook
    run twice prints the same numbers. Seeds must lie in ``[0, 2**32 - 1]``: PyTorch's CPU
    generator and NumPy read only 32 bits of a seed, so a larger one would silently give the run of
    a smaller one (``2**32 + 5`` that of ``5``); it raises ``ValueError`` instead.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be a non-negative integer, got {type(seed).__name__} {seed!r}")
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def check_seed(seed: Any) -> int:
    """``seed`` as an int in ``[0, 2**32)``, else ``ValueError`` (PyTorch's CPU generator and NumPy
    use 32 bits of a seed: a larger one would silently give the run of a smaller one)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**32), a non-negative integer below 2**32 "
                         f"(PyTorch's CPU generator and NumPy use 32 bits of a seed), got {seed!r}")
    return int(seed)


def get_device(device: str | torch.device = "auto") -> torch.device:
    """Resolve ``"auto"`` to CUDA when a GPU is present, else CPU; check any other device exists.
    CUDA without an index resolves to the current GPU (``cuda:0`` by default), the device its
    tensors report, so that ``tensor.device == get_device("auto")`` holds; on a GPU machine this
    initializes CUDA in the calling process (fork worker processes before it, or use spawn).

    Raises ``ValueError`` naming the device asked and the devices this machine has when it asks
    for CUDA (or MPS) that is not there, or a CUDA index beyond the GPUs present.
    """
    if isinstance(device, torch.device):
        resolved = device
    elif not isinstance(device, str):
        raise TypeError(f"device must be 'auto', 'cpu', 'cuda' or a torch.device, got {device!r}")
    elif device == "auto":
        resolved = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            resolved = torch.device(device)
        except RuntimeError:
            raise ValueError(f"device {device!r} is not a device name; use 'auto', 'cpu' or "
                             "'cuda'") from None
    check_available(resolved, device)
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved


def available_devices() -> list[str]:
    """The devices this machine has: ``cpu``, then ``cuda:0 ...`` and ``mps`` where present."""
    names = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())
                       if torch.cuda.is_available()]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        names.append("mps")
    return names


def check_available(resolved: torch.device, asked: Any = None) -> None:
    """Raise ``ValueError`` unless ``resolved`` is a CPU, CUDA or MPS device present here."""
    if resolved.type == "cpu":
        return
    asked = resolved if asked is None else asked
    have = available_devices()
    hint = (f"this machine has {', '.join(have)}; use one of them, or device='auto', which picks "
            "CUDA when there is a GPU and the CPU otherwise")
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(asked)!r} asks for CUDA, but CUDA is not available "
                             f"(no GPU, or torch built without CUDA): {hint}")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(asked)!r} asks for GPU {resolved.index}, but there are "
                             f"{torch.cuda.device_count()}: {hint}")
        return
    if resolved.type == "mps" and "mps" in have:
        return
    raise ValueError(f"device {str(asked)!r} is not available: {hint}")


def check_dtype(dtype: Any, name: str = "dtype") -> torch.dtype:
    """``torch.float64`` (the library's default) or ``torch.float32``: the two precisions the
    library's numerics are written and tested for (float16 and bfloat16 underflow the saturated
    softmax's gradients long before the theory's regime)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch dtype such as torch.float64, got {dtype!r}")
    if dtype not in (torch.float64, torch.float32):
        raise ValueError(f"{name} must be torch.float64 or torch.float32, got {dtype} (half "
                         "precisions are not supported: cast with .double() or .float())")
    return dtype


def as_array(value: Any, name: str) -> torch.Tensor:
    """Read ``value`` (tensor, array, list, number) as a tensor, keeping its dtype (booleans and
    integers stay so). Raises ``TypeError`` for objects that are not arrays of real numbers
    (strings, None, dicts, a :class:`Problem` where an array is expected, complex numbers)."""
    if isinstance(value, (str, bytes, dict, set)) or value is None or not (
            isinstance(value, (torch.Tensor, np.ndarray, list, tuple, int, float, np.number, np.bool_))):
        raise TypeError(f"{name} must be an array of real numbers (tensor, array or list), "
                        f"got {type(value).__name__}")
    try:                                  # lists and numbers through NumPy: Python floats stay float64
        tensor = torch.as_tensor(np.asarray(value) if isinstance(value, (list, tuple, int, float)) else value)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise TypeError(f"{name} must be an array of real numbers; could not read "
                        f"{type(value).__name__} {str(value)[:40]!r} as one") from None
    if not (tensor.is_floating_point() or tensor.dtype in (torch.int32, torch.int64, torch.bool,
                                                            torch.int16, torch.int8, torch.uint8)):
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    return tensor


def as_tensor(value: Any, name: str, dtype: torch.dtype | None = None,
              device: str | torch.device | None = None) -> torch.Tensor:
    """Convert ``value`` to a floating tensor (float64 unless told) and reject NaN/inf values.

    Raises ``TypeError`` for objects that are not arrays of real numbers (strings, None, dicts,
    a :class:`Problem` or an attention where an array is expected) and ``ValueError`` for
    NaN/inf entries.
    """
    tensor = as_array(value, name)
    tensor = tensor.to(dtype=dtype or (tensor.dtype if tensor.is_floating_point() else DEFAULT_DTYPE))
    if device is not None:
        tensor = tensor.to(get_device(device))
    check_finite(tensor, name)
    return tensor


def as_mask(value: Any, name: str, shape: tuple[int, ...] | None = None,
            meaning: str = "") -> torch.Tensor:
    """A boolean tensor (True/False per entry) of ``shape`` if given; ``TypeError`` for anything
    else (strings, None, 0/1 integers: a mask must say True or False)."""
    tensor = as_array(value, name)
    if tensor.dtype != torch.bool:
        raise TypeError(f"{name} must be a boolean tensor{' ' + meaning if meaning else ''}, got "
                        f"dtype {tensor.dtype} (convert with .bool() or == 1)")
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"{name} must be a boolean tensor of shape {tuple(shape)}{' ' + meaning if meaning else ''}, "
                         f"got {tuple(tensor.shape)}")
    return tensor


def exact_scale(values: Any) -> float:
    """A power of two ``s`` such that ``values * s`` has its largest entry in ``[2^-30, 2^30]``
    (``s = 1`` when it already does, or when every entry is 0). Multiplying by a power of two is
    exact in floating point, so solving a scale-invariant problem on ``values * s`` and scaling the
    answer back gives the same digits as solving it directly, without overflow or underflow for
    data of 1e-300 or 1e300."""
    top = float(np.max(np.abs(np.asarray(values)))) if np.size(values) else 0.0
    if not top > 0 or 2.0 ** -30 <= top <= 2.0 ** 30:
        return 1.0
    if top < np.finfo(np.float64).tiny:
        raise ValueError(f"the data's largest entry, {top:.1e}, is subnormal (below 2.2e-308): its "
                         "digits are lost; rescale the data")
    return 2.0 ** -np.frexp(top)[1]


def broadcast_shape(*shapes) -> torch.Size:
    """``torch.broadcast_shapes`` without its import of torch's symbolic-shape machinery (about half
    a second on its first call in a process): the shapes broadcast together, ``RuntimeError`` (as
    torch) when they do not."""
    try:
        return torch.Size(np.broadcast_shapes(*(tuple(shape) for shape in shapes)))
    except ValueError as error:
        raise RuntimeError(str(error)) from None


def check_finite(tensor: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``tensor`` holds NaN or inf, saying where the first one is."""
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name} contains NaN or inf (first at index {index}): clean the data "
                         "(for a trained parameter: the run diverged, lower the step size)")


def check_shape(tensor: torch.Tensor, name: str, expected: tuple[int | None, ...],
                meaning: str) -> None:
    """Check the trailing dimensions of ``tensor`` against ``expected`` (``None`` = any size)."""
    tail = tuple(tensor.shape[tensor.ndim - len(expected):]) if tensor.ndim >= len(expected) else None
    ok = tail is not None and all(e is None or e == s for e, s in zip(expected, tail))
    if not ok:
        raise ValueError(f"{name} must have shape (..., {meaning}) = (..., "
                         f"{', '.join('*' if e is None else str(e) for e in expected)}), "
                         f"got {tuple(tensor.shape)}")


def check_count(value: Any, name: str, minimum: int = 0) -> int:
    """An integer ``>= minimum`` (bools and non-integral floats are refused), returned as ``int``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _real_number(value: Any, name: str) -> float:
    """A Python or NumPy real scalar (bools refused) as a Python float; ``TypeError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def check_real(value: Any, name: str) -> float:
    """A finite real number (Python or NumPy scalar; bools refused), as a Python float."""
    number = _real_number(value, name)
    if not np.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def check_positive(value: Any, name: str, upper: float | None = None,
                   allow_zero: bool = False) -> float:
    """A finite real number ``> 0`` (``>= 0`` with ``allow_zero``), at most ``upper`` if given."""
    value = _real_number(value, name)
    low_ok = value >= 0 if allow_zero else value > 0
    if not (np.isfinite(value) and low_ok and (upper is None or value <= upper)):
        bounds = f"{'[0' if allow_zero else '(0'}, {'inf)' if upper is None else f'{upper:g}]'}"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")
    return value


def check_nonempty(tensor: torch.Tensor, name: str) -> None:
    """Refuse arrays with a zero-sized dimension (no examples, tokens, features or trials)."""
    if tensor.numel() == 0:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}: every dimension must be at "
                         "least 1")


def check_generator(generator: Any) -> None:
    """``None`` or a ``torch.Generator`` (from :func:`set_seed`)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (e.g. A.set_seed(0)) or None, "
                        f"got {type(generator).__name__}")


def check_flag(value: Any, name: str) -> bool:
    """A ``bool`` (numbers and strings are refused: ``"no"`` would read as true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_log_steps(log_steps, steps: int) -> torch.Tensor:
    """The steps at which a descent records its state: by default (None) step 0 and about 60
    log-spaced steps up to ``steps``; else a nonempty 1-D list of integers in ``[0, steps]``."""
    if log_steps is None:
        log_steps = np.unique(np.r_[0, np.geomspace(1, steps, 60).round().astype(int)])
    log_steps = as_array(log_steps, "log_steps")
    if log_steps.ndim != 1 or log_steps.numel() == 0:
        raise ValueError(f"log_steps must be a nonempty 1-D list of steps, got shape {tuple(log_steps.shape)}")
    if log_steps.is_floating_point() or log_steps.dtype == torch.bool:
        raise TypeError(f"log_steps must hold integer steps, got dtype {log_steps.dtype}")
    if bool((log_steps < 0).any()) or bool((log_steps > steps).any()):
        raise ValueError(f"log_steps must be a nonempty 1-D list of steps in [0, {steps}], got "
                         f"{log_steps.tolist()}")
    return log_steps
