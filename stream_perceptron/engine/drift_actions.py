"""What a detected drift does to the model (``--on-drift``): the engine's join of the drift
monitor, which knows nothing of learners, and the learner, which knows nothing of drifts."""

from __future__ import annotations

import logging

from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners._core import take_over
from stream_perceptron.learners.preprocessed import base_learner

__all__ = ["ACTIONS", "forget_average", "reset_learner"]

#: ``--on-drift``: what a drift does to the model.
ACTIONS = ("none", "reset", "forget")

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
    take_over(learner, fresh)
    logger.info("drift: the model was reset")


def forget_average(learner: StreamClassifier) -> None:
    """Restart the averaging of an averaged perceptron, in place: the weights, the bias, the
    label encoding and any scaling statistics stay; the average starts again from the current
    weights, as if they were the first (the model's ``n_seen`` and ``n_mistakes`` count from
    the restart). The past average, which a switch leaves pointing at the old concept and
    which moves by 1/t an example, no longer holds the model back.

    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron(averaged=True)
    >>> for x, y in [({"a": 1.0}, True), ({"a": 1.0}, False), ({"a": -1.0}, True)]:
    ...     model.learn_one(x, y)
    >>> model.average_weights == model.weights
    False
    >>> forget_average(model)
    >>> model.n_seen, model.average_weights == model.weights
    (0, True)
    """
    model = base_learner(learner)
    state = model.get_state()
    if not state["params"].get("averaged"):
        return
    state["n_seen"] = 0
    state["n_mistakes"] = 0  # a state's mistakes are among its examples (from_state checks)
    state["avg_ref"] = 0
    for holder in state.get("classes", [state]):
        holder["avg_weights_acc"] = []
        holder["avg_bias_acc"] = 0.0
    fresh = StreamClassifier.from_state(state)
    take_over(model, fresh)
    logger.info("drift: the average was restarted")
