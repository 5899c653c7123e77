"""Initial values for weights the first time a feature is seen."""

from __future__ import annotations

from typing import Any

from stream_perceptron.errors import StateError
from stream_perceptron.lazy_numpy import np

__all__ = ["WeightInitializer", "INIT_MODES", "RANDOM_INIT_SCALE"]

INIT_MODES = ("zeros", "random")
RANDOM_INIT_SCALE = 0.01


class WeightInitializer:
    """Draws initial weights: zeros, or small normal values from a seeded generator.

    Parameters
    ----------
    init
        ``"zeros"`` or ``"random"``.
    seed
        Seed of the random generator (``None``: fresh entropy).

    Examples
    --------
    >>> WeightInitializer("zeros", None).draw(2)
    [0.0, 0.0]
    >>> a = WeightInitializer("random", 7).draw(3)
    >>> a == WeightInitializer("random", 7).draw(3)
    True

    """

    __slots__ = ("random", "_rng")

    def __init__(self, init: str, seed: int | None) -> None:
        if init not in INIT_MODES:
            raise ValueError(f"init must be one of {INIT_MODES}, got {init!r}")
        self.random = init == "random"
        self._rng = np.random.default_rng(seed) if self.random else None

    def draw(self, n: int) -> list[float]:
        """Return ``n`` initial weights."""
        if self._rng is None:
            return [0.0] * n
        return self._rng.normal(0.0, RANDOM_INIT_SCALE, size=n).tolist()

    def get_state(self) -> dict[str, Any] | None:
        """The generator's state as JSON-serialisable data (``None`` for zeros)."""
        return None if self._rng is None else dict(self._rng.bit_generator.state)

    def set_state(self, state: dict[str, Any] | None) -> None:
        """Restore a state produced by :meth:`get_state`."""
        if self._rng is not None and state is not None:
            try:
                self._rng.bit_generator.state = state
            except (TypeError, ValueError, KeyError) as e:  # numpy's checks of a saved state
                raise StateError(f"rng is not a generator's state: {e!r}") from None


def new_features(x: dict, known: dict) -> list:
    """Features of ``x`` absent from ``known``, in an order independent of ``x``'s order."""
    fresh = [k for k in x if k not in known]
    if len(fresh) > 1:
        fresh.sort(key=repr)
    return fresh
