"""How many examples the learners' property tests and the tier tests' streams draw: all of
them, or a share where the same tests run again on another interpreter.

``STREAM_PERCEPTRON_TEST_SHARE`` (0 < share <= 1, default 1): ``scripts/test-newer-python.sh``
sets a quarter. There every test still runs, on fewer examples: the main venv's run draws them
all, and what the newer interpreter's run is for (the C helpers bit for bit against the pure
Python reference on that interpreter's internals, issue #25) shows on any of them.
"""

from __future__ import annotations

import os

SHARE = float(os.environ.get("STREAM_PERCEPTRON_TEST_SHARE", "1"))
if not 0 < SHARE <= 1:
    raise ValueError(f"STREAM_PERCEPTRON_TEST_SHARE={SHARE}: want 0 < share <= 1")


def examples(n: int, least: int = 25) -> int:
    """``n``, or its share (at least ``least``)."""
    return n if SHARE == 1 else max(least, round(n * SHARE))
