"""The optional C kernels of the learners' dict API, or ``None`` when they are not built.

:mod:`stream_perceptron._speedups` is compiled by ``pip install`` when a C compiler is there
(``setup.py``, an optional extension). Each kernel gives the learners' Python loops' results
to the last bit, and declines (returns ``None`` or ``False``) whatever it does not handle, so
the learners behave the same with or without it. ``STREAM_PERCEPTRON_PURE_PYTHON=1`` in the
environment at import time turns the kernels off.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["speedups"]

speedups: ModuleType | None
if os.environ.get("STREAM_PERCEPTRON_PURE_PYTHON", "") not in ("", "0"):
    speedups = None
else:
    try:
        from stream_perceptron import _speedups as speedups
    except ImportError:  # not built: the pure-Python loops
        speedups = None
