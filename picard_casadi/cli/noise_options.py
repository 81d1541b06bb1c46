"""``--weights`` and ``--noise`` into ``estimate``'s options (docs/cli.md)."""

from __future__ import annotations

from typing import Any

from ..noise import Noise
from .errors import CliError

__all__ = ["noise_options"]


def noise_options(weights: Any, noise: list[tuple[str | None, dict[str, Any]]] | None,
                  model: Any, options: dict[str, Any]) -> None:
    """The flags ``--weights`` and ``--noise`` into ``options`` (a flag wins over
    the model file's ``OPTIONS``); both at once is an error."""
    if noise and weights is not None:
        raise CliError("--noise and --weights both say what the noise is: give one")
    _weights(weights, model, options)
    _noise(noise, model, options)


def _noise(items: list[tuple[str | None, dict[str, Any]]] | None, model: Any,
           options: dict[str, Any]) -> None:
    """``--noise`` flags into ``options["noise"]`` (one ``pc.Noise`` per output;
    a flag without an output applies to every output a named one leaves)."""
    if not items:
        return
    every: dict[str, Any] = {}
    named: dict[str, dict[str, Any]] = {}
    for output, kwargs in items:
        if output is None:
            every = kwargs
        elif output not in model.y_names:
            raise CliError(f"--noise: the model has no output {output!r}; its outputs are "
                           f"{', '.join(model.y_names)}")
        else:
            named[output] = kwargs
    try:
        options["noise"] = {name: Noise(**named.get(name, every)) for name in model.y_names}
    except ValueError as err:
        raise CliError(f"--noise: {err}") from None
    options.pop("weights", None)


def _weights(value: Any, model: Any, options: dict[str, Any]) -> None:
    """``--weights`` into ``options`` (the flag wins over OPTIONS['weights'])."""
    if value is None:
        return
    options.pop("noise", None)  # the flag wins over OPTIONS['noise'] too
    if isinstance(value, str):
        options["weights"] = value  # "none" or "auto"
        return
    if value.size != model.ny:
        raise CliError(f"--weights: expected {model.ny} number(s), one per output "
                       f"({', '.join(model.y_names)}), got {value.size}")
    options["weights"] = value
