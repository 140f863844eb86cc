"""How the points of a regularization path were found: which start won at each radius
(:attr:`attnsvm.PathResult.start`), summarised by :class:`PathProvenance` in one sentence."""

from __future__ import annotations

from dataclasses import dataclass

import torch

START_NAMES = ("rescaled", "previous", "reference", "restart")   # codes 0, 1, 2, 3 + i


@dataclass(frozen=True)
class PathProvenance:
    """How the points of a path were found (from :meth:`PathResult.provenance`).

    ``start`` is :attr:`PathResult.start`; ``same_basin`` (``(radii, *trials)``, or ``None``
    without restarts) counts the random restarts whose end point lies within ``corr_tol`` of
    the returned point (the winner included when it is a restart). ``str()`` reads e.g.
    "best of up to 11 starts per radius (the previous point, its rescaling, the reference, 8
    random restarts); the reference won at radii 1, 2 (in 3 of 8 trials at R = 100); random
    restarts won at no radius; at R = 100, random restarts that reached the winner's basin
    (1 - corr <= 0.001): 5 of the 8".
    """

    radii: torch.Tensor
    start: torch.Tensor
    restarts: int
    same_basin: torch.Tensor | None
    corr_tol: float
    reference: bool

    def radii_won(self, kind: str) -> list[float]:
        """The radii at which a start of ``kind`` won in at least one trial."""
        won = _won(self.start, kind)
        return [R for R, w in zip(self.radii.tolist(), won.reshape(len(won), -1).any(1).tolist()) if w]

    def trials_won(self, kind: str, index: int = -1) -> tuple[int, int]:
        """``(trials where a start of kind won at radius number index, trials)``."""
        won = _won(self.start, kind)[index]
        return int(won.sum()), won.numel()

    def __str__(self) -> str:
        kinds = ["the previous point", "its rescaling"] + ["the reference"] * self.reference
        if self.restarts:
            kinds.append(f"{self.restarts} random restart{'s' * (self.restarts > 1)}")
        most = 2 + self.reference + self.restarts
        parts = [f"best of up to {most} starts per radius ({', '.join(kinds)})"]
        last = f"R = {self.radii[-1].item():.4g}"
        for kind, label in (("reference", "the reference"), ("restart", "random restarts")):
            if kind == "reference" and not self.reference or kind == "restart" and not self.restarts:
                continue
            radii = self.radii_won(kind)
            text = f"{label} won at " + ("no radius" if not radii else
                                         "radii " + ", ".join(f"{R:.4g}" for R in radii))
            won, count = self.trials_won(kind)
            if count > 1 and radii:
                text += f" (in {won} of {count} trials at {last})"
            parts.append(text)
        if self.same_basin is not None:
            last_counts = self.same_basin[-1].flatten()
            low, high = int(last_counts.min()), int(last_counts.max())
            span = (f"{low} of the {self.restarts}" if low == high else
                    f"between {low} and {high} of the {self.restarts}, by trial ({last_counts.numel()} trials)")
            parts.append(f"at {last}, random restarts that reached the winner's basin "
                         f"(1 - corr <= {self.corr_tol:g}): {span}")
        return "; ".join(parts)


def _won(start: torch.Tensor, kind: str) -> torch.Tensor:
    names = START_NAMES
    if kind not in names:
        raise ValueError(f"kind must be one of {names}, got {kind!r}")
    code = names.index(kind)
    return start >= code if kind == "restart" else start == code
