"""What a detected drift does to the model (``--on-drift``): the engine's join of the drift
monitor, which knows nothing of learners, and the learner, which knows nothing of drifts."""

from __future__ import annotations

import logging

from stream_perceptron.learners import StreamClassifier

__all__ = ["reset_learner"]

logger = logging.getLogger(__name__)


def reset_learner(learner: StreamClassifier) -> None:
    """Make ``learner`` a new model of the same hyperparameters, in place (the engine, the
    metrics and the checkpoints hold this very object): weights, averages, counters, label
    encoding and preprocessing statistics start afresh.

    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron(averaged=True)
    >>> model.learn_one({"a": 1.0}, True)
    >>> reset_learner(model)
    >>> model.n_seen, model.weights, model.averaged
    (0, {}, True)
    """
    fresh = learner.clone()
    learner.__dict__.clear()
    learner.__dict__.update(fresh.__dict__)
    logger.info("drift: the model was reset")
