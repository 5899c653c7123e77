"""The C kernels (stream_perceptron._speedups) against the pure-Python loops they replace.

Every comparison is exact: the same floats to the bit (signed zeros included), the same dict
keys in the same order, the same predictions and the same exceptions. A NaN is only compared as
a NaN, as ``repr`` shows it: which operand's sign and payload an operation passes on is up to
the C compiler (it may swap the operands of ``+``), in CPython's float code as in the kernels,
and no comparison or non-NaN result depends on it. The learner
modules read their kernels from a module global, ``_speedups``; :func:`kernels` sets it (the
real module, a counting proxy of it, or None for the pure-Python fallback).
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from example_counts import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_perceptron.learners._multiclass_model as multiclass_model_module
import stream_perceptron.learners.perceptron as perceptron_module
from stream_perceptron import MulticlassPerceptron, Perceptron, native
from stream_perceptron.learners.multiclass import _argmax

try:
    from stream_perceptron import _speedups
except ImportError:  # test_the_extension_is_built fails; the rest is skipped
    _speedups = None

needs_kernels = pytest.mark.skipif(_speedups is None, reason="the C extension is not built")


# -- switching kernels ---------------------------------------------------------------------------


class Counting:
    """The kernels module, counting the calls that were handled (not declined)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.handled: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        kernel = getattr(self.real, name)

        def counted(*args: Any) -> Any:
            result = kernel(*args)
            if result is not None and result is not False:
                self.handled[name] = self.handled.get(name, 0) + 1
            return result

        return counted


@contextmanager
def kernels(module: Any) -> Iterator[None]:
    """Run the learners with ``module`` as their kernels (None: the pure-Python loops)."""
    saved = perceptron_module._speedups, multiclass_model_module._speedups
    perceptron_module._speedups = multiclass_model_module._speedups = module
    try:
        yield
    finally:
        perceptron_module._speedups, multiclass_model_module._speedups = saved


# -- exact comparison ----------------------------------------------------------------------------


def exact(v: Any) -> Any:
    """A value's identity for comparison: its type and, for floats, its bits (NaN: NaN)."""
    if type(v) is float:
        return ("float", "nan" if v != v else struct.pack("<d", v))
    if isinstance(v, dict):
        return ("dict", [(exact(k), exact(u)) for k, u in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [exact(u) for u in v])
    if isinstance(v, np.generic):
        return (type(v).__name__, "nan" if v != v else v.tobytes())
    return (type(v).__name__, repr(v))


def state_of(model: Any) -> Any:
    """Everything a learner holds, exactly (key order included)."""
    common = (
        model._n_seen,
        model._n_mistakes,
        exact(model._max_norm),
        exact(model._w),
        exact(model._b),
        exact(model._u),
        exact(model._ub),
        repr(model._init.get_state()),
    )
    if isinstance(model, Perceptron):
        return (*common, model._labels.get_state())
    return common


def assert_same(got: Any, want: Any) -> None:
    assert exact(got) == exact(want)


# -- strategies ----------------------------------------------------------------------------------

# Keys of several types, some equal across types (1 == 1.0 == True, 0 == -0.0).
KEYS = st.sampled_from(
    ["a", "b", "c", "d", "é", "", 0, 1, 2, -7, 1.0, 1.5, -0.0, True, ("t", 1), frozenset({3})]
)
EDGE_INTS = [2**53, -(2**53), 2**53 + 1, 2**31, 3037000499, 3037000500, 2**62, 2**63, 10**30]
HANDLED = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-4, max_value=4),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 5e-324, 1e308]),
    st.integers(-5, 5),
    st.integers(-(2**53), 2**53),
)
# Values the kernels decline, so the learner must behave exactly as the pure-Python loop does.
UNHANDLED = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.builds(np.float32, st.floats(-4, 4, width=32)),
    st.builds(np.float64, st.floats(-4, 4)),
    st.booleans(),
    st.builds(Fraction, st.integers(-3, 3), st.integers(1, 3)),
    st.just("oops"),
)
LR = st.sampled_from([1.0, 0.5, 0.1, 1, 2, 3])
BIAS = st.sampled_from(["learned", "r2", "none"])


def records(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.dictionaries(KEYS, values, max_size=6)


OPS = ["predict_learn", "learn", "fused", "proba_learn", "mutate", "other", "margin"]
MUTATIONS = st.one_of(
    st.tuples(st.just("set"), KEYS, HANDLED),
    st.tuples(st.just("pop"), st.integers(0, 5), st.none()),
    st.tuples(st.just("same value, new object"), st.integers(0, 5), st.none()),
    st.tuples(st.just("clear and refill"), st.none(), st.none()),
)


def steps(values: st.SearchStrategy, labels: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(
        st.tuples(st.sampled_from(OPS), records(values), labels, MUTATIONS, records(values)),
        min_size=1,
        max_size=25,
    )


def mutate(x: dict, mutation: tuple) -> None:
    kind, a, b = mutation
    keys = list(x)
    if kind == "set":
        x[a] = b
    elif kind == "pop" and keys:
        del x[keys[a % len(keys)]]
    elif kind == "same value, new object" and keys:
        k = keys[a % len(keys)]
        v = x[k]
        x[k] = struct.unpack("<d", struct.pack("<d", v))[0] if type(v) is float else v
    elif kind == "clear and refill":
        items = list(x.items())
        x.clear()
        x.update(items)


def run(model: Any, plan: list, module: Any) -> list:
    """Apply ``plan`` to ``model`` with the given kernels; what every call returned or raised."""
    out: list = []
    with kernels(module):
        for op, x, y, mutation, other in plan:
            x = dict(x)
            try:
                if op == "predict_learn":
                    out.append(model.predict_one(x))
                    model.learn_one(x, y)
                elif op == "learn":
                    model.learn_one(x, y)
                elif op == "fused":
                    out.append(model.predict_learn_one(x, y))
                elif op == "proba_learn":
                    out.append(model.predict_proba_one(x))
                    model.learn_one(x, y)
                elif op == "mutate":  # predict, change x in place, learn from it
                    out.append(model.predict_one(x))
                    mutate(x, mutation)
                    model.learn_one(x, y)
                elif op == "other":  # predict x, learn another dict, then learn x
                    out.append(model.predict_one(x))
                    model.learn_one(dict(other), y)
                    model.learn_one(x, y)
                elif op == "margin":
                    out.append(model.margin(x, y))
                    model.learn_one(x, y)
            except Exception as e:  # noqa: BLE001 - the same exception is expected of both
                out.append(("raised", type(e).__name__, str(e)))
            out.append(state_of(model))
    return out


def check_equivalent(make: Any, plan: list, *, expect_handled: bool) -> None:
    counting = Counting(_speedups)
    fast = run(make(), plan, counting)
    pure = run(make(), plan, None)
    assert exact(fast) == exact(pure)
    if expect_handled and not counting.handled:
        # only when every example was refused before a kernel could run (its R not finite)
        refused = [
            o for o in fast if isinstance(o, tuple) and o[:2] == ("raised", "ValueTooLargeError")
        ]
        assert refused, "the kernels never ran"


# -- the extension is there ----------------------------------------------------------------------


def test_the_extension_is_built():
    """`pip install -e .` must have compiled it here: a silently failing build fails this."""
    assert _speedups is not None, "stream_perceptron._speedups is not built in this venv"
    assert _speedups.__file__.endswith((".so", ".pyd"))
    if os.environ.get("STREAM_PERCEPTRON_PURE_PYTHON", "") in ("", "0"):
        assert native.speedups is _speedups
        assert perceptron_module._speedups is _speedups
        assert multiclass_model_module._speedups is _speedups


def test_the_environment_variable_turns_the_kernels_off():
    code = "from stream_perceptron import native; print(native.speedups is None)"
    env = {**os.environ, "STREAM_PERCEPTRON_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


# -- learners: kernels == pure Python ------------------------------------------------------------

SETTINGS = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@needs_kernels
@SETTINGS
@given(
    plan=steps(HANDLED, st.booleans()),
    lr=LR,
    bias=BIAS,
    averaged=st.booleans(),
    random_init=st.booleans(),
)
def test_binary_perceptron_same_as_pure_python(plan, lr, bias, averaged, random_init):
    init = "random" if random_init else "zeros"
    check_equivalent(
        lambda: Perceptron(lr=lr, bias=bias, init=init, seed=5, averaged=averaged),
        plan,
        expect_handled=True,
    )


@needs_kernels
@SETTINGS
@given(
    plan=steps(HANDLED, st.sampled_from(["red", "blue", "green", 0, 1, 2.0, None])),
    lr=LR,
    bias=BIAS,
    averaged=st.booleans(),
    random_init=st.booleans(),
)
def test_multiclass_perceptron_same_as_pure_python(plan, lr, bias, averaged, random_init):
    init = "random" if random_init else "zeros"
    check_equivalent(
        lambda: MulticlassPerceptron(lr=lr, bias=bias, init=init, seed=5, averaged=averaged),
        plan,
        expect_handled=True,
    )


@needs_kernels
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy scalars overflowing
@settings(max_examples=examples(200), deadline=None)
@given(
    plan=steps(st.one_of(HANDLED, UNHANDLED), st.booleans()),
    lr=st.one_of(LR, st.just(np.float64(0.5)), st.just(Fraction(1, 2)), st.just(2**60)),
    bias=BIAS,
)
def test_binary_values_the_kernels_decline_behave_as_in_python(plan, lr, bias):
    check_equivalent(lambda: Perceptron(lr=lr, bias=bias), plan, expect_handled=False)


@needs_kernels
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy scalars overflowing
@settings(max_examples=examples(200), deadline=None)
@given(
    plan=steps(st.one_of(HANDLED, UNHANDLED), st.sampled_from(["red", "blue", 0, None])),
    lr=st.one_of(LR, st.just(np.float64(0.5)), st.just(Fraction(1, 2)), st.just(2**60)),
    bias=BIAS,
)
def test_multiclass_values_the_kernels_decline_behave_as_in_python(plan, lr, bias):
    check_equivalent(lambda: MulticlassPerceptron(lr=lr, bias=bias), plan, expect_handled=False)


@needs_kernels
@pytest.mark.parametrize(
    "value",
    [np.float32(0.1), np.float64(0.1), True, False, 2**53 + 1, 10**400, Fraction(1, 3), "s"],
    ids=repr,
)
@pytest.mark.parametrize("make", [Perceptron, MulticlassPerceptron])
def test_each_declined_value(make, value):
    """Declined by the kernels (checked), and the learner does what the pure loop does:
    np.float32 weights stay float32 under NumPy 2, a huge int raises OverflowError, a str
    raises TypeError."""
    x = {"a": 0.5, "b": value}
    assert _speedups.dot_norm({"a": 1.0, "b": 1.0}, x) is None
    assert _speedups.class_argmax({"c": {"b": 1.0}}, {"c": 0.0}, x) is None
    assert _speedups.axpy({}, x, 1.0) is False
    label = True if make is Perceptron else "c"
    plan = [
        ("learn", {"a": 1.0}, label, ("pop", 0, None), {}),
        ("predict_learn", x, label, ("pop", 0, None), {}),
        ("fused", x, label, ("pop", 0, None), {}),
        ("learn", x, not label if make is Perceptron else "d", ("pop", 0, None), {}),
    ]
    check_equivalent(make, plan, expect_handled=True)


# -- the kernels themselves against the Python loops ---------------------------------------------


def py_dot_norm(w: dict, x: dict) -> tuple[float, float]:
    dot = 0.0
    sq = 0.0
    for k, v in x.items():
        wk = w.get(k)
        if wk is not None:
            dot += wk * v
        sq += v * v
    return dot, math.sqrt(sq)


def py_class_scores(w: dict, b: dict, x: dict) -> dict:
    with kernels(None):
        return MulticlassPerceptron._scores(x, w, b)


def py_axpy(w: dict, x: dict, step: Any) -> None:
    for k, v in x.items():
        w[k] = w.get(k, 0.0) + step * v


FLOAT_WEIGHTS = st.dictionaries(KEYS, st.floats(allow_nan=True, allow_infinity=True), max_size=6)


@needs_kernels
@settings(max_examples=examples(500), deadline=None)
@given(w=FLOAT_WEIGHTS, x=records(HANDLED), step=st.one_of(HANDLED, LR))
def test_kernels_match_the_python_loops(w, x, step):
    assert_same(_speedups.dot_norm(w, x), py_dot_norm(w, x))
    got_w, want_w = dict(w), dict(w)
    assert _speedups.axpy(got_w, x, step) is True
    py_axpy(want_w, x, step)
    assert_same(got_w, want_w)  # values and key order


@needs_kernels
@settings(max_examples=examples(500), deadline=None)
@given(
    classes=st.lists(
        st.tuples(st.sampled_from(["r", "g", "b", 0, None, 2.5]), FLOAT_WEIGHTS, st.floats()),
        max_size=5,
    ),
    x=records(HANDLED),
)
def test_class_kernels_match_the_python_loops(classes, x):
    w = {c: wc for c, wc, _ in classes}
    b = {c: bc for c, _, bc in classes}
    scores = py_class_scores(w, b, x)
    r = py_norm(x)
    assert_same(_speedups.class_scores(w, b, x), scores)
    assert_same(_speedups.class_argmax(w, b, x), (_argmax(scores), r))


def py_norm(x: dict) -> float:
    """R as both learners compute it: a plain left fold of the squares from 0.0."""
    sq = 0.0
    for v in x.values():
        sq += v * v
    return math.sqrt(sq)


@needs_kernels
def test_sum_of_squares_is_a_plain_left_fold():
    """R is ``sq += v * v`` in x's order, in both learners and both tiers: not the builtin
    sum(), which adds ints exactly before floats and, from Python 3.12, compensates floats
    (Neumaier)."""
    x = {"a": 422762746, "b": 1356573733, "c": 269738600, "d": 0.1, "e": 7}
    loop = 0.0
    for v in x.values():
        loop += v * v
    assert sum(v * v for v in x.values()) != loop  # the two orders differ here
    floats = {"a": 1e8, "b": 1.0, "c": 1.0, "d": 1.0}  # 1e16 + 1 + 1 + 1: the 1s are lost
    assert py_norm(floats) == 1e8 != math.sqrt(math.fsum(v * v for v in floats.values()))
    for case in (x, floats, {"a": 3037000500}, {"a": 2**53, "b": -(2**53)}):
        assert_same(_speedups.class_argmax({}, {}, case)[1], py_norm(case))
        assert_same(_speedups.dot_norm({}, case)[1], py_norm(case))  # the binary learner's
        pure = MulticlassPerceptron()
        with kernels(None):
            pure.learn_one(dict(case), "a")
        assert_same(pure.max_norm, py_norm(case))


@needs_kernels
def test_int_step_times_int_value_adds_a_positive_zero():
    """In Python an int step times an int 0 is int 0, which adds +0.0: -0.0 + 0 == +0.0."""
    got, want = {"a": -0.0}, {"a": -0.0}
    assert _speedups.axpy(got, {"a": 0}, -2) is True
    py_axpy(want, {"a": 0}, -2)
    assert_same(got, want)
    assert math.copysign(1.0, got["a"]) == 1.0
    got = {"a": -0.0}
    assert _speedups.axpy(got, {"a": 0}, -2.0) is True  # a float step: -2.0 * 0 == -0.0
    assert math.copysign(1.0, got["a"]) == -1.0


@needs_kernels
def test_kernels_decline_what_they_do_not_handle():
    class D(dict):
        pass

    assert _speedups.dot_norm(D(a=1.0), {"a": 1.0}) is None
    assert _speedups.dot_norm({"a": 1.0}, D(a=1.0)) is None
    assert _speedups.dot_norm({"a": np.float64(1.0)}, {"a": 1.0}) is None
    assert _speedups.class_argmax({"c": {"a": 1.0}}, {}, {"a": 1.0}) is None  # no bias
    assert _speedups.class_argmax({"c": D()}, {"c": 0.0}, {"a": 1.0}) is None
    assert _speedups.class_argmax({"c": {}}, {"c": 0}, {"a": 1.0}) is None  # int bias
    w = {"a": 1.0}
    assert _speedups.axpy(w, {"a": 1.0}, np.float64(1.0)) is False
    assert _speedups.axpy(w, {"a": 1.0}, 2**53 + 1) is False
    assert _speedups.axpy(w, {"a": 1.0, "b": "s"}, 1.0) is False
    assert w == {"a": 1.0}
    # a weight that is not a float: axpy does Python's arithmetic on it
    w = {"a": Fraction(1, 2), "b": 1.0}
    assert _speedups.axpy(w, {"a": 1.0, "b": 1}, 2) is True
    assert w == {"a": 2.5, "b": 3.0} and type(w["a"]) is float


@needs_kernels
def test_many_features_beyond_the_stack_buffer():
    x = {f"f{i}": i * 0.25 - 7 for i in range(300)}
    w = {f"f{i}": 1.0 / (i + 1) for i in range(0, 300, 2)}
    assert_same(_speedups.dot_norm(w, x), py_dot_norm(w, x))
    got, want = dict(w), dict(w)
    _speedups.axpy(got, x, -0.5)
    py_axpy(want, x, -0.5)
    assert_same(got, want)
    result = _speedups.dot_norm(w, x, True)
    assert _speedups.recall((x, result, 5), x, 5) is result
    x["f299"] = x["f299"] * 1.0  # an equal value, another object
    assert x["f299"] == 67.75
    assert _speedups.recall((x, result, 5), x, 5) is None


# -- exceptions from keys ------------------------------------------------------------------------


class Key:
    """A feature name whose hash collides with every other Key; comparing raises if either
    side is a bomb."""

    def __init__(self, name: str, bomb: bool = False) -> None:
        self.name = name
        self.bomb = bomb

    def __hash__(self) -> int:
        return 42

    def __eq__(self, other: object) -> bool:
        if self.bomb or getattr(other, "bomb", False):
            raise KeyError(f"boom {self.name}")
        return self is other

    def __repr__(self) -> str:
        return f"Key({self.name!r})"


@needs_kernels
@pytest.mark.parametrize("make", [Perceptron, MulticlassPerceptron])
def test_an_exception_from_a_key_propagates_with_the_same_state(make):
    a = Key("a")
    label = True if make is Perceptron else "c"
    plan = [
        ("learn", {a: 1.0}, label, ("pop", 0, None), {}),
        ("learn", {"z": 3.0, Key("b", bomb=True): 4.0}, label, ("pop", 0, None), {}),
        ("predict_learn", {Key("c", bomb=True): 5.0}, label, ("pop", 0, None), {}),
        ("learn", {a: 2.0}, label, ("pop", 0, None), {}),
    ]
    fast = run(make(), plan, _speedups)
    pure = run(make(), plan, None)
    assert exact(fast) == exact(pure)
    raised = [o for o in fast if isinstance(o, tuple) and o[0] == "raised"]
    assert [o[1] for o in raised] == ["KeyError", "KeyError"]


# -- the predict_one -> learn_one memo -----------------------------------------------------------


def trained_binary() -> Perceptron:
    model = Perceptron()
    model.learn_one({"a": 1.0}, True)  # w = {a: 1}, b = 1
    model.learn_one({"a": 3.0, "b": 1.0}, False)  # score 4: w = {a: -2, b: -1}, b = 0
    return model


def pure_copy(model: Any) -> Any:
    with kernels(None):
        return copy.deepcopy(model)


def learn_both(model: Any, pure: Any, x: dict, y: Any) -> None:
    with kernels(_speedups):
        model.learn_one(x, y)
    with kernels(None):
        pure.learn_one(dict(x), y)
    assert state_of(model) == state_of(pure)


def py_predict(model: Any, x: dict) -> Any:
    """``predict_one`` by the learner's Python code (the perceptrons' ``predict_one`` is
    their C core's, whose memo is its own: tests/learners/test_binary_core.py and
    test_multiclass_core.py)."""
    return getattr(model, "_predict_one_py", model.predict_one)(x)


def py_learn(model: Any, x: dict, y: Any) -> None:
    getattr(model, "_learn_one_py", model.learn_one)(x, y)


@needs_kernels
def test_memo_is_used_for_the_same_unchanged_dict():
    with kernels(_speedups):
        model = trained_binary()
        x = {"a": -1.0, "b": 0.5}
        py_predict(model, x)
        assert _speedups.recall(model._memo, x, model.n_seen) is not None
        assert _speedups.recall(model._memo, dict(x), model.n_seen) is None  # another dict
        assert _speedups.recall(model._memo, x, model.n_seen + 1) is None  # model changed
        counting = Counting(_speedups)
    with kernels(counting):
        py_learn(model, x, True)
    assert counting.handled.get("recall") == 1 and "dot_norm" not in counting.handled
    assert model._memo is None  # x is not kept


@needs_kernels
@pytest.mark.parametrize(
    "change",
    [
        lambda x: x.__setitem__("a", 1.0),  # the score becomes -2: a mistake
        lambda x: x.__setitem__("c", 100.0),  # new feature: R grows
        lambda x: x.pop("a"),
        lambda x: x.update(a=x.pop("a")),  # same items, another order
    ],
    ids=["value", "added", "removed", "reordered"],
)
def test_memo_is_not_used_after_x_changes(change):
    model = trained_binary()
    pure = pure_copy(model)
    x = {"a": -1.0, "b": 0.5}
    with kernels(_speedups):
        assert model.predict_one(x) is True  # score 1.5
    change(x)
    with kernels(_speedups):
        assert _speedups.recall(model._memo, x, model.n_seen) is None
    learn_both(model, pure, x, False)


@needs_kernels
def test_a_stale_memo_would_give_another_model():
    """Guards the test above: with the memo reused after the change, the model differs."""
    model, stale = trained_binary(), trained_binary()
    x = {"a": -1.0, "b": 0.5}
    with kernels(_speedups):
        py_predict(model, x)  # score 1.5: no mistake for y = True
        dot, r, _ = model._memo[1]
        x["a"] = 1.0  # now score -2.5: a mistake for y = True
        py_learn(model, x, True)
        assert model.n_mistakes == 3
        # the memo of the first prediction, with a snapshot of x as it is now
        snapshot = tuple(item for kv in x.items() for item in kv)
        stale._memo = (x, (dot, r, snapshot), stale.n_seen)
        py_learn(stale, x, True)
        assert stale.n_mistakes == 2


@needs_kernels
def test_memo_is_not_used_after_an_equal_new_float():
    model = trained_binary()
    pure = pure_copy(model)
    x = {"a": -1.0, "b": 0.5}
    with kernels(_speedups):
        model.predict_one(x)
    old = x["b"]
    x["b"] = struct.unpack("<d", struct.pack("<d", old))[0]
    assert x["b"] == old and x["b"] is not old
    assert _speedups.recall(model._memo, x, model.n_seen) is None
    learn_both(model, pure, x, True)


@needs_kernels
def test_memo_survives_a_clear_and_refill_with_the_same_objects():
    model = trained_binary()
    x = {"a": -1.0, "b": 0.5}
    with kernels(_speedups):
        py_predict(model, x)
    items = list(x.items())
    x.clear()
    x.update(items)
    assert _speedups.recall(model._memo, x, model.n_seen) is not None  # the same content


@needs_kernels
@pytest.mark.parametrize("make", [Perceptron, MulticlassPerceptron])
def test_learning_another_dict_in_between_invalidates(make):
    label, other = (True, False) if make is Perceptron else ("c", "d")
    model, pure = make(), make()
    x1, x2 = {"a": 1.0, "b": -2.0}, {"a": 2.0}
    with kernels(_speedups):
        model.predict_one(x1)
        memo = model._memo
        model.learn_one(x2, other)  # the model changes
        assert _speedups.recall(memo, x1, model.n_seen) is None
        model.learn_one(x1, label)
    with kernels(None):
        pure.predict_one(x1)
        pure.learn_one(x2, other)
        pure.learn_one(x1, label)
    assert state_of(model) == state_of(pure)


@needs_kernels
def test_multiclass_memo_is_used_and_checked():
    model = MulticlassPerceptron()
    with kernels(_speedups):
        for x, y in [({"a": 1.0}, "r"), ({"b": 1.0}, "g"), ({"a": 2.0, "b": 0.5}, "r")]:
            model.learn_one(x, y)
        pure = pure_copy(model)
        x = {"a": 0.25, "b": 1.0}
        assert model.predict_one(x) == "g"
        counting = Counting(_speedups)
    x["a"] = 3.0  # now "r" wins: the stale memo would not count a mistake for y = "r"
    with kernels(counting):
        model.learn_one(x, "r")
    # the stale memo refused, the argmax computed again (by the model's store, a ClassStore:
    # not the module's kernel on dicts)
    assert "recall" not in counting.handled and model._store is not None
    with kernels(None):
        pure.learn_one(dict(x), "r")
    assert state_of(model) == state_of(pure)
    with kernels(_speedups):
        model.predict_one(x)
    counting = Counting(_speedups)
    with kernels(counting):
        model.learn_one(x, "r")
    assert counting.handled == {"recall": 1}


@needs_kernels
@pytest.mark.parametrize("make", [Perceptron, MulticlassPerceptron])
def test_memo_is_never_saved(make):
    model = make()
    label = True if make is Perceptron else "c"
    with kernels(_speedups):
        model.learn_one({"a": 1.0}, label)
        x = {"secret-feature-name": 1.0}
        model.predict_one(x)  # the binary perceptron: BinaryCore's memo, then the Python one
        py_predict(model, x)
    assert model._memo is not None
    assert b"secret-feature-name" not in pickle.dumps(model)
    assert pickle.loads(pickle.dumps(model))._memo is None
    assert copy.deepcopy(model)._memo is None
    assert model.clone()._memo is None
    assert "secret-feature-name" not in repr(model.get_state())
    assert make.from_state(model.get_state())._memo is None
