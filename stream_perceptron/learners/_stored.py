"""A learner's model in native arrays or in dicts: the store's share of the learner
(:class:`NativeModelStore`) and its model dicts (:class:`StoredModelDict`).

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

import math
from typing import Any, Generic, TypeVar, overload

from stream_perceptron.learners._base import overrides

__all__ = ["STORE_MAX_WAIT", "NativeModelStore", "StoredModelDict", "dict_key"]


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


#: The most examples a learner waits, after its model left its store, before it moves it into
#: one again (the wait doubles at every move out, up to this).
STORE_MAX_WAIT = 1 << 16


class NativeModelStore:
    """What a learner that may hold its model in a native store shares (a mixin, first among
    the bases): the store or None, the wait before a model that left its store goes back, the
    move back into dicts, and copies and pickles that hold dicts.

    A learner implements ``_take_store`` (with :meth:`_new_store`), ``_store_dicts`` (the
    attributes :func:`dict_key` names, built from a store) and ``_STORE_REFERENCE`` (the
    methods whose code the store's path reproduces: a subclass replacing one keeps dicts).
    """

    #: The model in native arrays, or None (its dicts hold it).
    _store: Any = None
    #: The example count from which the model may move into a store again, and the wait
    #: after the next move out (doubling, see ``STORE_MAX_WAIT``).
    _store_retry_at: float = 0
    _store_wait = 1
    _STORE_REFERENCE: tuple[str, ...] = ()
    _n_seen: int
    _init: Any

    def _take_store(self) -> Any:
        raise NotImplementedError

    def _store_dicts(self, store: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _new_store(self, kernels: Any, reference: type, dicts: tuple[Any, ...]) -> Any:
        """A ``ClassStore`` of ``kernels`` loaded with ``dicts`` (the model's), or None when
        the learner does not use one (``init="random"``, the C extension off, the wait after
        the last move out not over, a subclass of ``reference`` replacing the learning code)
        or the store declines the dicts (a feature key other than str or int, a value other
        than a float)."""
        if kernels is None or self._init.random or self._n_seen < self._store_retry_at:
            return None
        store = kernels.ClassStore()
        if overrides(type(self), reference, self._STORE_REFERENCE) or not store.load(*dicts):
            # what the dicts hold that no store takes (a key of another type, more cells than
            # a store has) stays while the model grows, and so does a subclass: no store is
            # tried again until the model is replaced (a binary model past a store's 4M
            # cells is refused in 0.16 s; retried every 65,536 examples, that was minutes
            # over a long stream)
            self._store_retry_at = math.inf
            return None
        return store

    def _store_reset(self) -> None:
        """A new model (a state loaded): it may go into a store at once."""
        self._store = None
        self._store_retry_at = 0
        self._store_wait = 1

    def _release_store(self) -> None:
        """Move the model from its store back into its dicts (the store dropped)."""
        store = self._store
        self._store = None
        for name, value in self._store_dicts(store).items():
            setattr(self, name, value)
        self._store_moved_out()

    def _store_moved_out(self) -> None:
        self._store_retry_at = self._n_seen + self._store_wait
        self._store_wait = min(2 * self._store_wait, STORE_MAX_WAIT)

    def _from_store(self, method: str, *args: Any) -> Any:
        """The store's ``method(*args)`` (the store taken when it can be); None when there is
        none or it does not handle them (the model then back in its dicts)."""
        store = self._store
        if store is None:
            store = self._take_store()
        if store is not None:
            got = getattr(store, method)(*args)
            if got is not None:
                return got
            self._release_store()
        return None

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()  # type: ignore[assignment]
        state.pop("_store", None)
        store = self._store
        if store is not None:  # a copy or a pickle holds dicts
            state.update(self._store_dicts(store))
        return state
