"""A learner as the state a shared-model group mixes, and back: what it describes
(:func:`model_of`), the learner a state loads as (:func:`learner_of`), a worker's own learner
as that state (:func:`shared_state`) and replaced in place by one (:func:`adopt`)."""

from __future__ import annotations

from typing import Any

from stream_perceptron.errors import EngineError, StateError
from stream_perceptron.learners import Preprocessed, StreamClassifier
from stream_perceptron.learners._core import take_over
from stream_perceptron.learners.preprocessed import base_learner

__all__ = [
    "Expected",
    "SharedModelMismatch",
    "SharedModelTooLarge",
    "adopt",
    "is_averaged",
    "learner_of",
    "model_of",
    "shared_state",
]

#: The learner's name and hyperparameters a shared state describes.
Expected = tuple[str, dict[str, Any]]


def model_of(state: dict[str, Any]) -> Expected:
    """The learner and hyperparameters a shared learner state describes (its ``hash_bits``,
    when the group hashes its features, among them)."""
    params = dict(state.get("params") or {})
    if "hash_bits" in state:
        params["hash_bits"] = state["hash_bits"]
    return str(state.get("learner")), params


def learner_of(state: dict[str, Any]) -> StreamClassifier:
    """The learner of a shared state: a group that hashes its features (``hash_bits`` beside
    the learner's own state) mixes the hashed model, and gets it back wrapped in the same
    hashing (:class:`~stream_perceptron.learners.Preprocessed`), so it predicts on the
    features' names.

    Raises
    ------
    StateError
        If no learner loads from ``state``, or its ``hash_bits`` is not a number of bits.
    """
    model = StreamClassifier.from_state(state)
    if "hash_bits" not in state:
        return model
    bits = state["hash_bits"]
    try:
        if type(bits) is not int:
            raise ValueError(f"hash_bits must be an int, got {bits!r}")
        return Preprocessed(model, hash_bits=bits)
    except ValueError as e:
        raise StateError(f"the shared state's {e}") from None


def shared_state(learner: StreamClassifier) -> dict[str, Any]:
    """The state of ``learner`` that the group mixes: its own, or for a learner whose features
    are hashed (a :class:`~stream_perceptron.learners.Preprocessed` with ``hash_bits``), the
    hashed model's state with ``hash_bits`` beside it: the buckets are the features, the same
    in every worker, and :func:`learner_of` wraps it
    back.

    Raises
    ------
    SharedModelMismatch
        If ``learner`` standardises its features (running statistics are not mixed).
    """
    if not isinstance(learner, Preprocessed):
        return learner.get_state()
    if learner.scale is not None:
        raise SharedModelMismatch(
            "a shared model cannot standardise its features (scale=...): a mixture of models "
            "standardised by different running statistics is not one model"
        )
    state = learner.model.get_state()
    state["hash_bits"] = learner.hash_bits
    return state


def adopt(learner: StreamClassifier, state: dict[str, Any]) -> None:
    """Make ``learner`` (in place: the engine and the metrics hold it) the learner of
    ``state`` (a :func:`shared_state`: a hashing learner keeps its hasher, its model is
    replaced)."""
    target = base_learner(learner)
    fresh = type(target).from_state(state)
    take_over(target, fresh)


class SharedModelMismatch(EngineError):
    """This worker's model flags differ from the model the topic holds (a usage error)."""

    exit_code = 2


class SharedModelTooLarge(EngineError):
    """A record for the model topic is larger than a Kafka message may be."""


def is_averaged(state: dict[str, Any]) -> bool:
    return bool((state.get("params") or {}).get("averaged"))
