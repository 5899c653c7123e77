"""A learner's state as JSON: the schema version, keys as JSON scalars, and the registry of
learner classes a state names (``learner``), which :meth:`StreamClassifier.from_state` reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from stream_perceptron.errors import StateError
from stream_perceptron.lazy_numpy import loaded, np

if TYPE_CHECKING:
    from stream_perceptron.learners._base import StreamClassifier

__all__ = ["LEARNERS", "READABLE_SCHEMA_VERSIONS", "SCHEMA_VERSION", "pairs", "registered",
           "to_json_key"]

#: Version 2 added ``average_half_life`` (a hyperparameter, so in ``params``), ``avg_ref`` and
#: the passive-aggressive learners; a version 1 state is read as the same model (no forgetting
#: average, reference example 0).
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)

#: The learner classes a saved state may name, by class name (``@registered``).
LEARNERS: dict[str, type[StreamClassifier]] = {}


_Learner = TypeVar("_Learner", bound="type[StreamClassifier]")


def registered(cls: _Learner) -> _Learner:
    """Class decorator: states naming ``cls.__name__`` are rebuilt as ``cls``."""
    LEARNERS[cls.__name__] = cls
    return cls


def to_json_key(k: Any) -> Any:
    """A feature name or label as a JSON scalar (numpy scalars become Python ones)."""
    if loaded() and isinstance(k, np.generic):
        k = k.item()
    if k is None or isinstance(k, (str, int, float, bool)):
        return k
    raise StateError(f"cannot save the key {k!r} of type {type(k).__name__} as JSON")


def pairs(d: dict) -> list[list[Any]]:
    """A dict as a JSON list of ``[key, value]`` pairs, keeping non-string keys' types."""
    return [[to_json_key(k), v] for k, v in d.items()]
