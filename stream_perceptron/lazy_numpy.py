"""NumPy, imported at its first use: ``from stream_perceptron.lazy_numpy import np``.

NumPy's import is 60-80 ms, about half of the command's start-up and a seventh of a whole
``cat data.csv | stream-perceptron run`` of a million lines (benchmarks row 4a). That run's
path (the C scanner, the binary kernels, the mistakes and the outputs) works on plain buffers
and never needs NumPy, so the modules it imports take ``np`` from here: an empty module object
that imports NumPy when an attribute is first asked of it, then holds NumPy's names itself,
so a later ``np.empty`` is the same dictionary lookup as on NumPy. Everything else (the other
learners' blocks, scaling, hashing, the random Fourier features, the model views) uses NumPy
as before and brings it in on first use. Type checkers see NumPy itself.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

__all__ = ["bool_types", "is_bool", "loaded", "np"]


class _OnFirstUse(types.ModuleType):
    """A stand-in for ``numpy`` that imports it on the first attribute asked of it."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        self.__dict__.update((k, v) for k, v in vars(numpy).items() if k not in _OWN)
        return getattr(numpy, name)  # a name NumPy makes on demand (its own __getattr__)


_OWN = ("__name__", "__doc__", "__spec__", "__loader__", "__package__")

if TYPE_CHECKING:
    import numpy as np
else:
    np = _OnFirstUse("numpy", "NumPy, imported at its first use (stream_perceptron.lazy_numpy)")


def loaded() -> bool:
    """Whether NumPy has been imported (by anyone): while it has not, no NumPy object exists."""
    return "numpy" in sys.modules


def bool_types() -> tuple[type, ...]:
    """``(bool, numpy.bool_)``, or ``(bool,)`` while NumPy is not imported (no NumPy boolean
    can exist then)."""
    numpy = sys.modules.get("numpy")
    return (bool,) if numpy is None else (bool, numpy.bool_)


def is_bool(value: object) -> bool:
    """``isinstance(value, (bool, numpy.bool_))`` without importing NumPy for it."""
    return isinstance(value, bool_types())
