"""What the tests of the learners' C cores share (tests/learners/test_binary_core.py,
test_multiclass_core.py, test_class_store.py): exact comparison and the runs of a stream."""

from __future__ import annotations

import struct
from typing import Any

import pytest

try:
    from stream_perceptron import _speedups
except ImportError:  # the C extension is not built
    _speedups = None

#: A test module of the C tier skips itself without the C extension (``pytestmark``).
needs_speedups = pytest.mark.skipif(_speedups is None, reason="the C extension is not built")


def bits(v: Any) -> Any:
    """A value's identity for comparison: its type and, for floats, its bits (NaN: NaN),
    recursively through lists, tuples and dicts (key order included)."""
    if type(v) is float:
        return ("f", "nan" if v != v else struct.pack("<d", v).hex())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [bits(u) for u in v])
    if isinstance(v, dict):
        return ("dict", [(bits(k), bits(u)) for k, u in v.items()])
    return (type(v).__name__, repr(v))


def run(model: Any, data: list, api: str) -> list:
    """The predictions (as :func:`bits`) of ``model`` over ``data``: ``predict_learn_one``
    (api "fused") or ``predict_one`` then ``learn_one`` (api "split")."""
    got = []
    for x, y in data:
        if api == "fused":
            got.append(model.predict_learn_one(x, y))
        else:
            got.append(model.predict_one(x))
            model.learn_one(x, y)
    return [bits(p) for p in got]


def pure_run(
    module: Any, make: Any, data: list, api: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list]:
    """The reference: a model ``make()`` run with the C helpers of its learner ``module`` off
    (no store, so its C core hands every call to the Python methods)."""
    kernels = module._speedups
    monkeypatch.setattr(module, "_speedups", None)
    try:
        model = make()
        return model, run(model, data, api)
    finally:
        monkeypatch.setattr(module, "_speedups", kernels)


def check_copies_carry_the_fields(model: Any, data: list, fields: Any, other: Any) -> None:
    """Copies, deep copies and pickles of ``model`` hold its state and its core's fields
    (``fields(model)``) and learn on as it does; ``take_over(other, model)`` makes ``other``
    (another learner of the same class, ``lr=0.5, averaged=True``) hold them too."""
    import copy
    import pickle

    from stream_perceptron.learners._core import take_over

    for twin in (copy.copy(model), copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert bits(twin.get_state()) == bits(model.get_state())
        assert fields(twin) == fields(model)
        reference = copy.deepcopy(model)
        assert run(twin, data, "split") == run(reference, data, "split")
        assert bits(twin.get_state()) == bits(reference.get_state())
    take_over(other, model)
    assert bits(other.get_state()) == bits(model.get_state())
    assert other.lr == 1.0 and other.averaged is False


def check_memo_serves(model: Any, label: Any, change: Any, learn_reference: Any) -> None:
    """``predict_one`` then ``learn_one`` of one dict: the learning step takes predict_one's
    fold exactly when the dict is unchanged (``change`` None, see :data:`MEMO_CHANGES`);
    ``learn_reference(x, label)`` then learns a copy of the dict, the way the test's reference
    learns (the caller compares the two models)."""
    x = {"f0": -1.5, "f1": 0.25, "f2": 2.0}
    model.predict_one(x)
    hits = model._memo_hits
    if change is not None:
        change(x)
    model.learn_one(x, label)
    assert model._memo_hits == hits + (change is None)
    learn_reference(dict(x), label)


def _same_value_new_float(x: dict) -> None:
    x["f1"] = struct.unpack("<d", struct.pack("<d", x["f1"]))[0]


#: What may happen to a dict between ``predict_one`` and ``learn_one`` (x holds f0 and f1):
#: nothing (the memo serves), or a change the memo must see.
MEMO_CHANGES = pytest.mark.parametrize(
    "change",
    [
        None,
        lambda x: x.__setitem__("f1", 5.0),
        lambda x: x.__setitem__("f9", 100.0),  # a new feature: R grows
        lambda x: x.pop("f0"),
        lambda x: x.update(f0=x.pop("f0")),  # the same items, another order
        _same_value_new_float,  # an equal float, another object
    ],
    ids=["unchanged", "value", "added", "removed", "reordered", "equal-new-float"],
)
