"""stream-perceptron: a streaming online-learning engine built around the perceptron.

The learners are imported when first used (``from stream_perceptron import Perceptron`` works
as usual), so the command line starts without NumPy until it needs it and can set up the
process first (see :mod:`stream_perceptron.cli`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stream_perceptron.errors import StreamPerceptronError

if TYPE_CHECKING:
    from stream_perceptron.learners import (
        CentroidClassifier,
        MulticlassPassiveAggressive,
        MulticlassPerceptron,
        PassiveAggressive,
        Perceptron,
        Preprocessed,
        RandomFourierFeatures,
    )

__all__ = [
    "Perceptron",
    "MulticlassPerceptron",
    "CentroidClassifier",
    "PassiveAggressive",
    "MulticlassPassiveAggressive",
    "Preprocessed",
    "RandomFourierFeatures",
    "StreamPerceptronError",
    "__version__",
]

__version__ = "0.1.0"

_LEARNERS = frozenset(__all__) - {"StreamPerceptronError", "__version__"}


def __getattr__(name: str) -> Any:
    if name in _LEARNERS:
        value = getattr(importlib.import_module("stream_perceptron.learners"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'stream_perceptron' has no attribute {name!r}")
