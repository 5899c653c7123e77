"""``_speedups.ClassStore``: the perceptrons' models in native arrays.

While a ``MulticlassPerceptron`` (plain or averaged) learns through the dict API its model
lives in a store (no dicts meanwhile, nothing kept in step); a binary ``Perceptron`` keeps its
weights and accumulators in a store of one class. The store must give exactly what the
module's kernels give on the equivalent dicts (themselves held to the pure-Python loops in
test_speedups.py), update exactly as the pure-Python ``_update`` (key order included), give
its model back as those very dicts, and decline (None, nothing changed) what it does not
handle, on every Python (it reads no CPython internal).
"""

from __future__ import annotations

import copy
import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import _speedups, bits, needs_speedups
from example_counts import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_perceptron.learners._multiclass_model as multiclass_model_module
import stream_perceptron.learners.perceptron as perceptron_module
from stream_perceptron import MulticlassPerceptron, Perceptron
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners._state import pairs

pytestmark = needs_speedups


def model_dicts() -> tuple[dict, dict, dict, dict]:
    """A model whose class dicts got their keys in orders unlike the store's slots; its first
    class is None, which any later class beats in the reference's argmax (``best is None``)."""
    w = {None: {"a": 0.5}, "red": {"a": 1.0, "b": -2.0}, "blue": {"c": 0.5, "a": 3.0}, 7: {}}
    b = {None: 0.0, "red": 0.25, "blue": -1.0, 7: 0.0}
    u = {None: {}, "red": {"b": 4.0}, "blue": {"a": 1.5, "c": -0.5, "z": 9.0}, 7: {}}
    ub = {None: 0.0, "red": 2.0, "blue": 0.0, 7: -0.0}
    return w, b, u, ub


def loaded(w: dict, b: dict, u: dict, ub: dict) -> Any:
    store = _speedups.ClassStore()
    assert store.load(w, b, u, ub) is True
    return store


def test_the_store_gives_back_the_dicts_it_took_key_order_included():
    dicts = model_dicts()
    store = loaded(*dicts)
    assert bits(store.dicts()) == bits(dicts)
    assert list(store.classes) == [None, "red", "blue", 7]
    # what a state saves, straight from the arrays: the pairs and biases of those dicts
    w, b, u, ub = dicts
    for c in w:
        assert bits(store.pairs(c)) == bits(pairs(w[c]))
        assert bits(store.pairs(c, True)) == bits(pairs(u[c]))
    assert bits(store.biases()) == bits((b, ub))
    with pytest.raises(KeyError):
        store.pairs("nobody")
    empty = _speedups.ClassStore()
    assert empty.load({}, {}, {}, {}) is True and empty.dicts() == ({}, {}, {}, {})


XS = st.dictionaries(
    st.sampled_from(["a", "b", "c", "z", "new", 0, 5]),
    st.one_of(st.floats(-4, 4), st.integers(-5, 5), st.sampled_from([0.0, -0.0, math.inf])),
    max_size=5,
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=XS, t=st.sampled_from([1, 2, 7, 1.5, 1e300]), snapshot=st.booleans())
@pytest.mark.parametrize("alone", [True, False])
def test_the_scores_are_the_module_kernels_on_the_dicts(alone, x, t, snapshot):
    w, b, u, ub = model_dicts()
    if not alone:  # no accumulator without its weight: the fold reads no presence byte
        del u["blue"]["z"]
    store = loaded(w, b, u, ub)
    assert bits(store.avg_class_argmax(t, x, snapshot)) == bits(
        _speedups.avg_class_argmax(w, b, u, ub, t, x, snapshot)
    )
    assert bits(store.class_argmax(x, snapshot)) == bits(_speedups.class_argmax(w, b, x, snapshot))
    assert bits(store.avg_class_scores(t, x)) == bits(_speedups.avg_class_scores(w, b, u, ub, t, x))
    assert bits(store.class_scores(x)) == bits(_speedups.class_scores(w, b, x))


def test_what_the_store_declines():
    # dicts it does not take: a key other than an exact str or int, a weight not a float,
    # classes that differ between the dicts
    for w, b, u, ub in [
        ({"r": {1.5: 1.0}}, {"r": 0.0}, {"r": {}}, {"r": 0.0}),
        ({"r": {True: 1.0}}, {"r": 0.0}, {"r": {}}, {"r": 0.0}),
        ({"r": {"a": 1}}, {"r": 0.0}, {"r": {}}, {"r": 0.0}),
        ({"r": {"a": 1.0}}, {"r": 0}, {"r": {}}, {"r": 0.0}),
        ({"r": {}}, {"r": 0.0}, {"s": {}}, {"r": 0.0}),
        ({"r": {}}, {"r": 0.0}, {"r": {}}, {}),
    ]:
        assert _speedups.ClassStore().load(w, b, u, ub) is False
    store = loaded(*model_dicts())
    before = bits(store.dicts())
    # an example it does not handle: a key or a value of another type
    for x in ({1.5: 1.0}, {True: 1.0}, {"a": np.float64(1.0)}, {"a": 2**60}, {"a": "s"}):
        assert store.avg_class_argmax(2, x) is None
        assert store.class_argmax(x) is None
        assert store.update(x, "red", "blue", 1.0, 1.0, 1) is None
    # steps it does not handle: an lr not a float or a small int, y_hat not a class or y
    assert store.update({"a": 1.0}, "red", "blue", 2**60, 1.0, 1) is None
    assert store.update({"a": 1.0}, "red", "nope", 1.0, 1.0, 1) is None
    assert store.update({"a": 1.0}, "red", "red", 1.0, 1.0, 1) is None
    assert store.update({"a": 3}, "red", "blue", 2**40, 1.0, 2**20) is None  # c * lr > 2**53
    assert bits(store.dicts()) == before


def reference_update(dicts: tuple, x: dict, y: Any, y_hat: Any, lr: Any, db: Any, c: Any) -> Any:
    """MulticlassPerceptron._update's arithmetic on the dicts (the pure-Python helpers)."""
    from stream_perceptron.learners._maths import add_scaled

    w, b, u, ub = dicts
    new = y not in w
    wy, uy = ({}, {}) if new else (w[y], u[y])
    by, uby = (0.0, 0.0) if new else (b[y], ub[y])
    by += db
    if c is not None:
        uby += c * db
    targets: tuple = (wy, lr) + ((uy, c * lr) if c is not None else ())
    bh = ubh = 0.0
    if y_hat is not None:
        bh = b[y_hat] + -db
        ubh = ub[y_hat] + c * -db if c is not None else ub[y_hat]
        targets += (w[y_hat], -lr) + ((u[y_hat], c * -lr) if c is not None else ())
    if not all(-math.inf < v < math.inf for v in (by, uby, bh, ubh)):
        return "a bias"
    if not add_scaled(None, x, *targets):
        return "a weight"
    if new:
        w[y], u[y] = wy, uy
    b[y], ub[y] = by, uby
    if y_hat is not None:
        b[y_hat], ub[y_hat] = bh, ubh
    return True


STEPS = st.one_of(st.sampled_from([1.0, 0.5, 1, 3, 0, -0.0, 1e308]), st.floats(-4, 4))


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            XS.filter(lambda x: all(abs(v) < math.inf for v in x.values())),
            st.sampled_from(["red", "blue", 7, "green", "teal"]),
            st.sampled_from([None, "red", "blue", 7]),  # y_hat None: no prediction
            STEPS,
            STEPS,
            st.one_of(st.none(), st.integers(0, 9), st.floats(0.5, 4)),
        ),
        max_size=12,
    )
)
def test_an_update_is_the_pure_python_update(steps):
    want = model_dicts()
    store = loaded(*model_dicts())
    for x, y, y_hat, lr, db, c in steps:
        if y_hat == y:
            continue
        expected = reference_update(want, x, y, y_hat, lr, db, c)
        assert store.update(x, y, y_hat, lr, db, c) == expected
        assert bits(store.dicts()) == bits(want)


def stream(n: int) -> list[tuple[dict, Any]]:
    """A small multi-class stream over str keys, with int values now and then."""
    out = []
    for i in range(n):
        x: dict = {f"f{j}": ((i * 7 + j * 13) % 11 - 5) / 4 for j in range(i % 3, 5)}
        if i % 17 == 0:
            x["f9"] = (i % 5) - 2
        out.append((x, ("red", "blue", "green")[(i * 5) % 3 if i % 4 else i % 2]))
    return out


def binary_stream(n: int) -> list[tuple[dict, Any]]:
    """``stream`` with two labels."""
    return [(x, y == "red") for x, y in stream(n)]


class Counting:
    """The kernels module, counting what is called on it."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        def counted(*args: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return getattr(self.real, name)(*args)

        return counted


def run(model: MulticlassPerceptron, data: list, api: str) -> list:
    out = []
    for x, y in data:
        if api == "fused":
            out.append(model.predict_learn_one(x, y))
        elif api == "proba":
            out.append(bits(model.predict_proba_one(x)))
            model.learn_one(x, y)
        else:
            out.append(model.predict_one(x))
            model.learn_one(x, y)
    return out


#: Per learner kind: its class, its module (whose kernels a test swaps), the stream, its
#: model dicts, and the module's kernels on dicts that a model in its store never calls.
KINDS = {
    "multiclass": (MulticlassPerceptron, multiclass_model_module, stream, ("_w", "_b", "_u", "_ub"),
                   ("avg_class_argmax", "avg_class_scores", "class_argmax", "class_scores")),
    "binary": (Perceptron, perceptron_module, binary_stream, ("_w", "_u"),
               ("dot_norm", "avg_dot_norm", "axpy_finite")),
}  # fmt: skip


@pytest.mark.parametrize("api", ["fused", "split", "proba"])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize(
    ("averaged", "lr", "half_life"),
    [(True, 0.5, None), (True, 1, None), (True, 0.5, 3.0), (False, 0.5, None), (False, 1, None)],
)
@pytest.mark.parametrize("kind", KINDS)
def test_the_learner_in_its_store_is_the_pure_python_one(
    kind, api, bias, averaged, lr, half_life, monkeypatch
):
    """Multi-class or binary (a store of one class, the biases attributes), averaged or
    plain: the model stays in one store, and every prediction, score and the whole state are
    the pure-Python learner's, to the bit."""
    cls, module, make_stream, model_dicts, dict_kernels = KINDS[kind]
    data = make_stream(300)

    def make() -> Any:
        return cls(bias=bias, lr=lr, averaged=averaged, average_half_life=half_life)

    counting = Counting(_speedups)
    monkeypatch.setattr(module, "_speedups", counting)
    fast = make()
    got = run(fast, data, api)
    # the model stayed in one store: never moved back into dicts, never scored from dicts
    assert counting.calls.get("ClassStore") == 1
    assert fast._store is not None
    assert all(getattr(fast, f"_dict{name}") is None for name in model_dicts)
    for kernel in dict_kernels:
        assert kernel not in counting.calls  # the module's kernels on dicts
    monkeypatch.setattr(module, "_speedups", None)
    pure = make()
    want = run(pure, data, api)
    assert got == want
    monkeypatch.setattr(module, "_speedups", _speedups)
    # what only reads the model leaves it in its store
    assert bits(fast.get_state()) == bits(pure.get_state())
    assert bits((fast.weights, fast.bias, fast.average_weights, fast.average_bias)) == bits(
        (pure.weights, pure.bias, pure.average_weights, pure.average_bias)
    )
    if kind == "multiclass":
        assert fast.classes == pure.classes
    assert bits(fast.geometric_margins(data[:20])) == bits(pure.geometric_margins(data[:20]))
    assert fast._store is not None
    # pickles and deep copies hold dicts, and predict the same
    for copied in (pickle.loads(pickle.dumps(fast)), copy.deepcopy(fast)):
        assert "_store" not in copied.__dict__
        assert bits(copied._w) == bits(pure._w)
        assert [copied.predict_one(x) for x, _ in data[:50]] == [
            pure.predict_one(x) for x, _ in data[:50]
        ]
    # reading a model dict moves the model back into dicts, exactly
    for name in ("_w", "_b", "_u", "_ub", "_max_norm", "_n_seen", "_n_mistakes"):
        assert bits(getattr(fast, name)) == bits(getattr(pure, name))
    assert fast._store is None


@pytest.mark.parametrize("kind", KINDS)
def test_an_example_the_store_declines_moves_the_model_out_and_back_later_exactly(
    kind, monkeypatch
):
    cls, module, make_stream, _, _ = KINDS[kind]
    data = make_stream(400)
    odd = {50, 51, 120, 121, 122, 300}  # numpy values, a float key: the pure-Python code
    data = [
        ({k: np.float64(v) for k, v in x.items()} if i in odd and i % 2 else
         {**x, 2.5: 1.0} if i in odd else x, y)
        for i, (x, y) in enumerate(data)
    ]  # fmt: skip
    counting = Counting(_speedups)
    monkeypatch.setattr(module, "_speedups", counting)
    fast = cls(averaged=True)
    got = run(fast, data, "split")
    assert counting.calls["ClassStore"] > 1  # moved back into a store after each
    monkeypatch.setattr(module, "_speedups", None)
    pure = cls(averaged=True)
    assert got == run(pure, data, "split")
    assert bits(fast.get_state()) == bits(pure.get_state())


@pytest.mark.parametrize(
    ("params", "x", "what"),
    [
        (dict(lr=1e200, bias="none"), {"f1": 1e120}, "a weight"),  # lr * v overflows
        (dict(bias="r2"), {"f1": 1e154}, "a bias"),  # c(t) * R**2 overflows
        (dict(), {"f1": 1e200, "f2": 1e200}, "R"),
    ],
)
def test_a_refused_example_leaves_the_stored_model_as_it_was(params, x, what):
    model = MulticlassPerceptron(averaged=True, **params)
    for z, y in stream(50):
        model.predict_learn_one(z, y)
    assert model._store is not None
    before = bits(model.get_state())
    with pytest.raises(ValueTooLargeError, match=what):
        model.learn_one(x, "nobody")  # a new class: a mistake
    assert model._store is not None and bits(model.get_state()) == before


def test_a_subclass_replacing_the_learning_code_keeps_its_model_in_dicts():
    class Custom(MulticlassPerceptron):
        def _update(self, *args: Any) -> None:
            super()._update(*args)
            self.updates = getattr(self, "updates", 0) + 1

    model = Custom(averaged=True)
    data = stream(100)
    run(model, data, "fused")
    assert model._store is None and model.updates == model.n_mistakes > 0
    assert MulticlassPerceptron(averaged=True)._take_store() is not None


STATES = Path(__file__).parent / "data" / "multiclass_averaged_states_7203fbe.json"


@pytest.mark.parametrize("name", ["r2", "forgetting"])
@pytest.mark.parametrize("api", ["fused", "split"])
@pytest.mark.parametrize("pure", [False, True])
def test_a_state_saved_before_the_store_resumes_exactly(name, api, pure, monkeypatch):
    """States saved by the code before issue 25 (dicts and AvgCache; the fixture's
    ``made_by``), after 200 examples and after 400: loaded now, learning the last 200 makes
    the same predictions and the same state, to the bit, in the store and in pure Python."""
    fixture = json.loads(STATES.read_text())
    saved = fixture["models"][name]
    data = [(x, y) for x, y in fixture["stream"][200:]]
    if pure:
        monkeypatch.setattr(multiclass_model_module, "_speedups", None)
    model = MulticlassPerceptron.from_state(saved["before"])
    assert run(model, data, api) == saved["predictions"]
    assert (model._store is None) == pure
    assert bits(model.get_state()) == bits(saved["after"])


def test_a_refused_binary_update_leaves_the_store_and_a_subclass_keeps_dicts():
    """An update that would make a weight non-finite changes nothing in the store; a subclass
    replacing the learning code keeps its model in dicts."""
    model = Perceptron(averaged=True, lr=1e200, bias="none")
    run(model, binary_stream(50), "fused")
    before = bits(model.get_state())
    x = {"f1": 1e120}
    with pytest.raises(ValueTooLargeError, match="a weight"):  # lr * v overflows
        model.learn_one(x, model.predict_one(x) is False)
    assert model._store is not None and bits(model.get_state()) == before

    class Custom(Perceptron):
        def _learn(self, *args: Any) -> float:
            return super()._learn(*args)

    custom = Custom()
    run(custom, binary_stream(60), "fused")
    assert custom._store is None and custom._dict_w


DICT_STATES = Path(__file__).parent / "data" / "dict_model_states_166dba3.json"


@pytest.mark.parametrize(
    "name",
    ["binary_plain", "binary_averaged_r2", "binary_forgetting", "multiclass_plain",
     "multiclass_plain_r2"],
)  # fmt: skip
@pytest.mark.parametrize("api", ["fused", "split"])
@pytest.mark.parametrize("pure", [False, True])
def test_a_state_saved_before_the_binary_and_plain_stores_resumes_exactly(
    name, api, pure, monkeypatch
):
    """States saved by the code before the binary and the plain multi-class perceptrons
    learned in native stores (the fixture's ``made_by``), after 200 examples and after 400:
    loaded now, learning the last 200 makes the same predictions and the same state, to the
    bit, in the store and in pure Python."""
    fixture = json.loads(DICT_STATES.read_text())
    saved = fixture["models"][name]
    binary = name.startswith("binary")
    cls, module = (Perceptron, perceptron_module) if binary else (
        MulticlassPerceptron, multiclass_model_module)  # fmt: skip
    data = [(x, y == "red" if binary else y) for x, y in fixture["stream"][200:]]
    if pure:
        monkeypatch.setattr(module, "_speedups", None)
    model = cls.from_state(saved["before"])
    assert run(model, data, api) == saved["predictions"]
    assert (model._store is None) == pure
    assert bits(model.get_state()) == bits(saved["after"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_no_store_takes_is_not_offered_to_one_again(kind, monkeypatch):
    """Once the model's dicts hold a key no store takes (here a float), every later load would
    be refused too (keys never leave a model): no store is built again, however long the
    stream (a refused load of a model past the store's 4M cells costs 0.16 s); a model loaded
    from a state may go into a store at once."""
    cls, module, make_stream, _, _ = KINDS[kind]
    counting = Counting(_speedups)
    monkeypatch.setattr(module, "_speedups", counting)
    model = cls()
    data = make_stream(2000)
    run(model, data[:100], "fused")
    assert model._store is not None
    x, y = data[100]
    model.learn_one({**x, 2.5: 1.0}, y if model.predict_one(x) != y else not_label(kind, y))
    run(model, data[101:200], "fused")  # the wait after the move out is over: a load refused
    built = counting.calls["ClassStore"]
    run(model, data[200:], "fused")
    assert counting.calls["ClassStore"] == built and model._store is None
    restored = cls.from_state(model.get_state())
    assert restored._store is None and restored._store_retry_at == 0


def not_label(kind: str, y: Any) -> Any:
    """A label other than ``y``: the example is a mistake, so its keys enter the model."""
    if kind == "binary":
        return not y
    return "red" if y != "red" else "blue"
