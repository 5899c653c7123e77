"""The base that gives the binary perceptron its dict API in C (issue 25): ``BinaryCore``.

With the C helpers built, :class:`~stream_perceptron.learners.perceptron.Perceptron` derives
from :class:`stream_perceptron._speedups.BinaryCore`: its scalars (``_b``, ``_ub``,
``_n_seen``, ``_n_mistakes``, ``_max_norm``, ``_avg_ref``), its ``_store``, its ``_labels``
and the hyperparameters the learning step reads (``lr``, ``_bias_mode``, ``averaged``,
``average_half_life``, ``_beta``) are fields of that C object, which the Python code reads
and sets as attributes, and ``predict_one``, ``learn_one`` and ``predict_learn_one`` run in C
for the usual case, calling the learner's pure-Python methods (``_predict_one_py``,
``_learn_one_py``, ``_predict_learn_one_py``) for everything else. Without the C helpers,
:class:`PythonCore` stands in: the same three methods, straight to the Python ones.

The fields are not in the instance ``__dict__``: a copy, a pickle (``__getstate__`` /
``__setstate__``) and an in-place replacement of the model (:func:`take_over`) carry them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stream_perceptron import native

__all__ = ["CORE_FIELDS", "Core", "PythonCore", "take_over"]

#: The attributes ``BinaryCore`` holds as fields (not in ``__dict__``).
CORE_FIELDS = (
    "_b", "_ub", "_n_seen", "_n_mistakes", "_max_norm", "_store", "_labels",
    "lr", "_bias_mode", "averaged", "average_half_life", "_avg_ref", "_beta",
)  # fmt: skip


class PythonCore:
    """``BinaryCore`` when the C helpers are not built: the learner's Python methods."""

    _store: Any = None

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self._predict_one_py(x, **kwargs)  # type: ignore[attr-defined]

    def learn_one(self, x: dict, y: Any) -> None:
        self._learn_one_py(x, y)  # type: ignore[attr-defined]

    def predict_learn_one(self, x: dict, y: Any) -> Any:
        return self._predict_learn_one_py(x, y)  # type: ignore[attr-defined]


if TYPE_CHECKING:
    Core = PythonCore
else:
    Core = native.speedups.BinaryCore if native.speedups is not None else PythonCore


def core_state(obj: object) -> dict[str, Any]:
    """The fields of ``obj``'s ``BinaryCore`` that are set (none for other objects)."""
    if not isinstance(obj, Core) or Core is PythonCore:
        return {}
    state = {}
    for name in CORE_FIELDS:
        try:
            state[name] = getattr(obj, name)
        except AttributeError:  # not set yet
            pass
    return state


def take_over(target: Any, fresh: Any) -> None:
    """Make ``target`` hold ``fresh``'s model, in place (the engine, the metrics and the
    checkpoints hold ``target``): its ``__dict__`` and, for a binary perceptron, its
    ``BinaryCore`` fields become ``fresh``'s."""
    target.__dict__.clear()
    target.__dict__.update(fresh.__dict__)
    for name, value in core_state(fresh).items():
        setattr(target, name, value)
