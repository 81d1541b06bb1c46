"""The noise of an output: its distribution and its standard deviation.

A :class:`Noise` says, for one output, how a measurement scatters about the
model's value.  ``estimate(..., noise=...)`` takes one for every output (a
single one for all, a sequence, or a mapping by output name)::

    pc.Noise()                          # normal, sigma unknown: estimated
    pc.Noise(sigma=0.05)                # normal, sigma known
    pc.Noise(sigma="data")              # each measurement's sigma from Experiment(sigma=...)
    pc.Noise(sigma="s_conc")            # a noise parameter, shared by every output naming it
    pc.Noise("log-normal")              # log(y) normal, sigma estimated on the log scale

The distributions are PEtab's: ``"normal"`` (PEtab's ``lin``/``normal``),
``"log-normal"`` (``log``/``normal``: ``log y`` is normal with standard
deviation ``sigma``) and ``"log10-normal"`` (``log10``/``normal``).  The
likelihood's terms, with their constants as PEtab writes them, are in
``docs/likelihood.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Noise", "DISTRIBUTIONS"]

#: the supported noise distributions and the scale on which each is normal
DISTRIBUTIONS = {"normal": "lin", "log-normal": "log", "log10-normal": "log10"}


@dataclass(frozen=True)
class Noise:
    """The noise model of one output.

    Parameters
    ----------
    distribution : {"normal", "log-normal", "log10-normal"}
        ``"normal"``: ``y = g + e``; ``"log-normal"``: ``log y = log g + e``;
        ``"log10-normal"``: ``log10 y = log10 g + e``; ``e`` normal with
        standard deviation ``sigma`` (on the log scale for the last two, so
        ``sigma = 0.1`` is about 10 % of the value).  The data and the output
        must then be positive.
    sigma : None, float or str
        ``None`` (default): unknown, estimated with the parameters by
        maximum likelihood.  A positive number: known.  ``"data"``: each
        measurement's own, from the experiments' ``sigma`` arrays
        (``Experiment(..., sigma=...)``).  Any other string names a noise
        parameter: estimated, one value shared by every output whose noise
        names it.
    bounds : (float, float)
        Bounds of an estimated ``sigma`` (default ``(0, inf)``).

    Raises
    ------
    ValueError
        For an unknown distribution (naming those supported), a ``sigma``
        that is not positive and finite, or bounds out of order.
    """

    distribution: str = "normal"
    sigma: float | str | None = None
    bounds: tuple[float, float] = (0.0, math.inf)

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"Noise: distribution {self.distribution!r} is not supported; use one of "
                f"{', '.join(repr(d) for d in DISTRIBUTIONS)} (a Laplace or other "
                "distribution: not yet)")
        s = self.sigma
        if s is not None and not isinstance(s, str):
            try:
                value = float(s)
            except (TypeError, ValueError):
                raise ValueError(f"Noise: `sigma` must be None, a positive number or a name, "
                                 f"got {s!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"Noise: `sigma` must be positive and finite, got {s!r}; "
                                 "use sigma=None to estimate it")
            object.__setattr__(self, "sigma", value)
        elif isinstance(s, str) and not s.strip():
            raise ValueError("Noise: `sigma` as a name must not be empty")
        try:
            lo, hi = (float(b) for b in self.bounds)
        except (TypeError, ValueError):
            raise ValueError(f"Noise: `bounds` must be two numbers (lower, upper), got "
                             f"{self.bounds!r}") from None
        if not (lo >= 0 and hi > lo) or math.isnan(hi):
            raise ValueError(f"Noise: `bounds` must satisfy 0 <= lower < upper, got "
                             f"{self.bounds!r}")
        object.__setattr__(self, "bounds", (lo, hi))

    @property
    def scale(self) -> str:
        """The scale on which the noise is normal: ``"lin"``, ``"log"`` or ``"log10"``."""
        return DISTRIBUTIONS[self.distribution]

    @property
    def estimated(self) -> bool:
        """Whether ``sigma`` is estimated (unknown, or a noise parameter)."""
        return self.sigma is None or (isinstance(self.sigma, str) and self.sigma != "data")

    def describe(self) -> str:
        """One phrase: the distribution and where sigma comes from."""
        if self.sigma is None:
            where = "sigma estimated"
        elif self.sigma == "data":
            where = "sigma per measurement (the data's)"
        elif isinstance(self.sigma, str):
            where = f"sigma = noise parameter {self.sigma!r}"
        else:
            where = f"sigma = {self.sigma:g} (known)"
        return f"{self.distribution}, {where}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (:meth:`from_dict` reads it back)."""
        return {"distribution": self.distribution, "sigma": self.sigma,
                "bounds": [self.bounds[0], self.bounds[1] if math.isfinite(self.bounds[1])
                           else "inf"]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Noise:
        """The noise model of :meth:`to_dict`'s form."""
        lo, hi = d.get("bounds", (0.0, math.inf))
        return cls(distribution=d.get("distribution", "normal"), sigma=d.get("sigma"),
                   bounds=(float(lo), float(hi)))
