"""Learners: River-compatible online classifiers."""

from __future__ import annotations

from stream_perceptron.learners._base import DenseLearner, StreamClassifier
from stream_perceptron.learners._state import LEARNERS
from stream_perceptron.learners.centroid import CentroidClassifier
from stream_perceptron.learners.fourier import RandomFourierFeatures
from stream_perceptron.learners.multiclass import MulticlassPerceptron
from stream_perceptron.learners.passive_aggressive import (
    MulticlassPassiveAggressive,
    PassiveAggressive,
)
from stream_perceptron.learners.perceptron import Perceptron
from stream_perceptron.learners.preprocessed import Preprocessed

__all__ = [
    "Perceptron",
    "MulticlassPerceptron",
    "CentroidClassifier",
    "PassiveAggressive",
    "MulticlassPassiveAggressive",
    "Preprocessed",
    "RandomFourierFeatures",
    "StreamClassifier",
    "DenseLearner",
    "LEARNERS",
]
