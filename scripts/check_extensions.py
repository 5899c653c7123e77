"""Exit 1, naming them, when the C extensions did not build.

setup.py marks them optional, so pip installs the package without them when the compiler or
Python.h is missing; `make` must not: the learners would silently run their pure-Python
loops and tests/fast would skip.
"""

from __future__ import annotations

import importlib
import sys

missing = []
for name in ("_speedups", "_dense", "_features", "_drift"):
    try:
        importlib.import_module(f"stream_perceptron.{name}")
    except ImportError as e:
        missing.append(f"stream_perceptron.{name} ({e})")
if missing:
    sys.exit(
        "the C extensions did not build: " + "; ".join(missing)
        + ". See pip's output (scripts/install-build-deps.sh installs a C compiler and Python.h)"
    )
print("C extensions: _speedups, _dense, _features, _drift built")
