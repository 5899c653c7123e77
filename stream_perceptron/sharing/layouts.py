"""How a mixable learner's state holds its linear model, behind one Protocol: the binary
perceptron's state holds one weight vector at its top level beside its label encoding, the
multi-class one a list of classes. Mixing, increments and moves read and write states only
through :func:`layout_of`, never by the learner's name; a new mixable learner family is one
more :class:`StateLayout` in :data:`LAYOUTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from stream_perceptron.errors import StateError

__all__ = [
    "LAYOUTS",
    "MixError",
    "StateLayout",
    "key_of",
    "labels_of",
    "layout_of",
    "linear_parts",
    "pairs_of",
    "vector_of",
]


class MixError(StateError):
    """The states cannot be mixed (other learners, other hyperparameters, other labels)."""


def key_of(k: Any) -> tuple[bool, Any]:
    """A feature or class as a dict key: ``True`` and ``1`` are one key in Python but distinct
    features and classes here."""
    return (isinstance(k, bool), k)


def vector_of(entries: list[list[Any]]) -> dict[tuple[bool, Any], float]:
    """A state's ``[name, value]`` pairs as a vector keyed by :func:`key_of`."""
    return {key_of(k): float(v) for k, v in entries}


def pairs_of(d: dict[tuple[bool, Any], float]) -> list[list[Any]]:
    """A vector of :func:`vector_of` as a state's ``[name, value]`` pairs."""
    return [[k[1], v] for k, v in d.items()]


def labels_of(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The binary label encoding of a mixed state: the first settled one of ``states``.

    Every encoding maps its negative label to -1 and its positive one to +1 (``False``/``True``,
    ``0``/``1``, ``-1``/``+1``), so weights learned under any of them mix as they are; only the
    labels a model prints differ. The group's encoding is the mixture's (a fold lists it
    first); a worker moving onto a mixture lists its own state first and keeps printing its
    own spelling (partitions that spell labels ``true/false`` and ``1/0`` learn one model)."""
    settled = [s["labels"] for s in states if s["labels"].get("settled")]
    return dict(settled[0] if settled else states[0]["labels"])


class StateLayout(Protocol):
    """Where a learner state keeps its classes' weights, biases and averaging accumulators."""

    def entries(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """Per class (``label`` ``None`` for a binary learner): ``weights``, ``bias``,
        ``avg_weights_acc`` and ``avg_bias_acc`` as the state holds them."""

    def write(self, out: dict[str, Any], classes: list[dict[str, Any]]) -> None:
        """Put ``classes`` (entries as :meth:`entries` gives them) into the state ``out``."""

    def merge_labels(self, out: dict[str, Any], states: Sequence[dict[str, Any]]) -> None:
        """Give ``out`` the label encoding of ``states`` (their mixture or a move onto one)."""


_NO_CLASS = {"weights": [], "bias": 0.0, "avg_weights_acc": [], "avg_bias_acc": 0.0}


class BinaryLayout:
    """The binary perceptron's: one vector at the top level, beside ``labels``."""

    def entries(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(state, label=None)]

    def write(self, out: dict[str, Any], classes: list[dict[str, Any]]) -> None:
        only = classes[0] if classes else _NO_CLASS
        out.update(
            weights=only["weights"], bias=only["bias"],
            avg_weights_acc=only["avg_weights_acc"], avg_bias_acc=only["avg_bias_acc"],
        )  # fmt: skip

    def merge_labels(self, out: dict[str, Any], states: Sequence[dict[str, Any]]) -> None:
        out["labels"] = labels_of(states)


class ClassesLayout:
    """The multi-class perceptron's: a list of classes, each its own vector."""

    def entries(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return list(state["classes"])

    def write(self, out: dict[str, Any], classes: list[dict[str, Any]]) -> None:
        out["classes"] = classes

    def merge_labels(self, out: dict[str, Any], states: Sequence[dict[str, Any]]) -> None:
        pass  # the classes are the labels


#: The learners whose states mix, by the name their state gives (``learner``).
LAYOUTS: dict[str, StateLayout] = {
    "Perceptron": BinaryLayout(),
    "MulticlassPerceptron": ClassesLayout(),
}


def layout_of(state: dict[str, Any]) -> StateLayout:
    """The layout of ``state``'s learner; :class:`MixError` when its states do not mix."""
    layout = LAYOUTS.get(state.get("learner"))  # type: ignore[arg-type]
    if layout is None:
        raise MixError(f"a {state.get('learner')!r} cannot be mixed (only {tuple(LAYOUTS)})")
    return layout


def linear_parts(state: dict[str, Any]) -> dict[tuple[bool, Any], dict[str, Any]]:
    """Per class (``None`` for a binary learner): weights, bias, accumulators as vectors."""
    return {
        key_of(e["label"]): {
            "label": e["label"],
            "w": vector_of(e["weights"]),
            "b": float(e["bias"]),
            "u": vector_of(e["avg_weights_acc"]),
            "ub": float(e["avg_bias_acc"]),
        }
        for e in layout_of(state).entries(state)
    }
