"""The bases that give both perceptrons their dict API in C (issue 25): ``BinaryCore`` and
``MulticlassCore``.

With the C helpers built, :class:`~stream_perceptron.learners.perceptron.Perceptron` derives
from :class:`stream_perceptron._speedups.BinaryCore` and
:class:`~stream_perceptron.learners.multiclass.MulticlassPerceptron` from
:class:`stream_perceptron._speedups.MulticlassCore`. The learner's counters and R (``_n_seen``,
``_n_mistakes``, ``_max_norm``, ``_avg_ref``), its ``_store``, the hyperparameters the learning
step reads (``lr``, ``_bias_mode``, ``averaged``, ``average_half_life``, ``_beta``) and, for the
binary learner, its biases (``_b``, ``_ub``) and ``_labels``, for the multi-class one
``_bool_classes``, are fields of that C object (the class's ``_CORE_FIELDS``), which the Python
code reads and sets as attributes. ``predict_one``, ``learn_one`` and ``predict_learn_one`` run
in C for the usual case, calling the learner's pure-Python methods (``_predict_one_py``,
``_learn_one_py``, ``_predict_learn_one_py``) for everything else. Without the C helpers,
:class:`PythonCore` stands in: the same three methods, straight to the Python ones.

The fields are not in the instance ``__dict__``: a copy, a pickle (:class:`CoreFields`) and an
in-place replacement of the model (:func:`take_over`) carry them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stream_perceptron import native

__all__ = [
    "BINARY_FIELDS", "MULTICLASS_FIELDS", "BinaryCore", "CoreFields", "MulticlassCore",
    "PythonCore", "core_state", "take_over",
]  # fmt: skip

_HEAD_FIELDS = (
    "_n_seen", "_n_mistakes", "_max_norm", "_store",
    "lr", "_bias_mode", "averaged", "average_half_life", "_avg_ref", "_beta",
)  # fmt: skip
#: The attributes each core holds as fields (not in ``__dict__``).
BINARY_FIELDS = (*_HEAD_FIELDS, "_b", "_ub", "_labels")
MULTICLASS_FIELDS = (*_HEAD_FIELDS, "_bool_classes")


class PythonCore:
    """A core when the C helpers are not built: the learner's Python methods."""

    _store: Any = None

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self._predict_one_py(x, **kwargs)  # type: ignore[attr-defined]

    def learn_one(self, x: dict, y: Any) -> None:
        self._learn_one_py(x, y)  # type: ignore[attr-defined]

    def predict_learn_one(self, x: dict, y: Any) -> Any:
        return self._predict_learn_one_py(x, y)  # type: ignore[attr-defined]


if TYPE_CHECKING:
    BinaryCore = PythonCore
    MulticlassCore = PythonCore
elif native.speedups is not None:
    BinaryCore = native.speedups.BinaryCore
    MulticlassCore = native.speedups.MulticlassCore
else:
    BinaryCore = MulticlassCore = PythonCore


def core_state(obj: object) -> dict[str, Any]:
    """The fields of ``obj``'s C core that are set (none for other objects)."""
    if isinstance(obj, PythonCore):
        return {}
    state = {}
    for name in getattr(type(obj), "_CORE_FIELDS", ()):
        try:
            state[name] = getattr(obj, name)
        except AttributeError:  # not set yet
            pass
    return state


class CoreFields:
    """Copies and pickles of a learner whose fields a C core holds: ``__getstate__`` adds
    them (a mixin before ``NativeModelStore``, whose state holds dicts, not the store)."""

    _CORE_FIELDS: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()  # type: ignore[assignment]
        state.update(core_state(self))  # the core's fields, not in __dict__
        state.pop("_store", None)  # a copy or a pickle holds dicts (NativeModelStore's)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        for name in self._CORE_FIELDS:
            if name in state:
                setattr(self, name, state.pop(name))
        self.__dict__.update(state)


def take_over(target: Any, fresh: Any) -> None:
    """Make ``target`` hold ``fresh``'s model, in place (the engine, the metrics and the
    checkpoints hold ``target``): its ``__dict__`` and its core's fields become ``fresh``'s."""
    target.__dict__.clear()
    target.__dict__.update(fresh.__dict__)
    for name, value in core_state(fresh).items():
        setattr(target, name, value)
