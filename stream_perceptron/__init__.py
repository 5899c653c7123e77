"""stream-perceptron: a streaming online-learning engine built around the perceptron."""

from __future__ import annotations

from stream_perceptron.errors import StreamPerceptronError
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
