"""A learner's state as JSON: the schema version, keys as JSON scalars, and the registry of
learner classes a state names (``learner``), which :meth:`StreamClassifier.from_state` reads."""

from __future__ import annotations

from typing import Any, TypeVar

from stream_perceptron.errors import StateError
from stream_perceptron.lazy_numpy import loaded, np
from stream_perceptron.state import json_key, short

__all__ = ["LEARNERS", "READABLE_SCHEMA_VERSIONS", "SCHEMA_VERSION", "class_entries", "pairs",
           "registered", "to_json_key"]

#: Version 2 added ``average_half_life`` (a hyperparameter, so in ``params``), ``avg_ref`` and
#: the passive-aggressive learners; a version 1 state is read as the same model (no forgetting
#: average, reference example 0).
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)

#: The learner classes a saved state may name, by class name (``@registered``; the learners'
#: base, which reads it, checks that the class is one of its own).
LEARNERS: dict[str, type] = {}


_Learner = TypeVar("_Learner", bound=type)


def registered(cls: _Learner) -> _Learner:
    """Class decorator: states naming ``cls.__name__`` are rebuilt as ``cls``."""
    LEARNERS[cls.__name__] = cls
    return cls


_JSON_KEY_TYPES = frozenset({str, int, float, bool, type(None)})


def to_json_key(k: Any) -> Any:
    """A feature name or label as a JSON scalar (numpy scalars become Python ones)."""
    if type(k) in _JSON_KEY_TYPES:  # the usual key, at once (this runs for every key saved)
        return k
    if loaded() and isinstance(k, np.generic):
        k = k.item()
    if k is None or isinstance(k, (str, int, float, bool)):
        return k
    raise StateError(f"cannot save the key {k!r} of type {type(k).__name__} as JSON")


def pairs(d: dict) -> list[list[Any]]:
    """A dict as a JSON list of ``[key, value]`` pairs, keeping non-string keys' types."""
    return [[to_json_key(k), v] for k, v in d.items()]


def class_entries(state: dict[str, Any]) -> list[tuple[Any, dict[str, Any], str]]:
    """A multi-class state's ``classes`` read back: ``(label, entry, field)`` for each, the
    entry a JSON object, the label a JSON scalar there once (``field``: the entry's name in
    messages). :class:`StateError` naming the field otherwise."""
    entries = state["classes"]
    if not isinstance(entries, list):
        raise StateError(f"classes is {short(entries)}, not a list of classes")
    out: list[tuple[Any, dict[str, Any], str]] = []
    labels: dict[Any, None] = {}
    for i, entry in enumerate(entries):
        field = f"classes[{i}]"
        if not isinstance(entry, dict):
            raise StateError(f"{field} is {short(entry)}, not a class")
        label = json_key(entry.get("label"), f"{field}.label")
        if label in labels:  # True and 1 are one key too: check_class_kind keeps them apart
            raise StateError(f"{field}.label {short(label)} is there twice")
        labels[label] = None
        out.append((label, entry, field))
    return out
