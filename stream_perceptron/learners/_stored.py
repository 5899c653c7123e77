"""The model dicts of a learner that may hold its model in a native store instead.

A learner with a ``_store`` (a :class:`~stream_perceptron._speedups.ClassStore`, or None) keeps
each of its model dicts in the attribute :func:`dict_key` names while the dicts hold the model;
while the store holds it, that attribute is None. Reading or setting the model attribute (the
pure-Python code, the dense path, a test) first moves the model back into its dicts (the
learner's ``_release_store``).

A data descriptor rather than ``__getattr__``, and attributes set to None rather than deleted
from ``__dict__``: a class that defines ``__getattr__``, and an instance whose ``__dict__`` is
read or has keys deleted, lose CPython's specialised attribute loads (measured on the binary
perceptron, Python 3.11: ``predict_one`` 543 ns -> 694 ns an example, ``learn_one`` 583 ->
840 ns).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

__all__ = ["StoredModelDict", "dict_key"]


def dict_key(name: str) -> str:
    """The attribute that holds the model dict ``name`` (None while the store holds it)."""
    return f"_dict{name}"


_T = TypeVar("_T")


class StoredModelDict(Generic[_T]):
    """A model dict the learner's store may hold instead (see the module)."""

    key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = dict_key(name)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> StoredModelDict[_T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if obj._store is not None:
            obj._release_store()
        return getattr(obj, self.key)

    def __set__(self, obj: Any, value: _T) -> None:
        if obj._store is not None:
            obj._release_store()
        setattr(obj, self.key, value)
