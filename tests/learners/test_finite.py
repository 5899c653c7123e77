"""The model never holds a non-finite number (issue 16): an example whose update would make R,
a weight, a bias or an averaging accumulator inf or NaN is refused with ValueTooLargeError,
the model byte-identical to before it, in both tiers (the C helpers and dense kernels, and the
pure-Python reference); the next good example is learned. And booleans are classes of their
own in the multi-class learners."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import struct
from typing import Any

import numpy as np
import pytest

import stream_perceptron.learners._multiclass_model as multiclass_model_module
import stream_perceptron.learners.perceptron as perceptron_module
from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron, native
from stream_perceptron.errors import LabelError, RecordError, ValueTooLargeError
from stream_perceptron.formats.base import VALUE_TOO_LARGE

CONFIGS = [
    dict(bias=bias, averaged=averaged, init=init, lr=lr, seed=3)
    for bias, averaged, init, lr in itertools.product(
        ("learned", "r2", "none"), (False, True), ("zeros", "random"), (1.0, 1e6)
    )
]
IDS = [
    f"{c['bias']}-{'avg' if c['averaged'] else 'plain'}-{c['init']}-lr{c['lr']:g}" for c in CONFIGS
]

# (x, label index) sequences: ordinary examples around hostile ones
HOSTILE = [
    {"a": 1e200},
    {"a": 1e154, "b": 1e154},  # squares overflow
    {"a": 1.7e308},
    {"a": 10**200},  # an int whose square overflows float
    {"a": 10**400},  # an int past float
    {"a": math.inf},
    {"a": math.nan},
    {"a": 1e303, "b": -1e303},  # with lr 1e6: the step overflows
    {"a": 1e154},  # R^2 overflows the r2 bias (once R is 1e154)
    {"b": 1.3e154},
]
GOOD = [{"a": 1.0, "b": -2.0}, {"a": -0.5, "c": 3.0}, {"b": 1e-3}, {"a": 2.0, "b": 2.0, "c": -1.0}]


def _stream(n_labels: int) -> list[tuple[dict, int]]:
    out = []
    for i, bad in enumerate(HOSTILE):
        for j, good in enumerate(GOOD):
            out.append((good, (i + j) % n_labels))
        out.append((bad, i % n_labels))
        out.append((bad, (i + 1) % n_labels))
    return out


def _bits(value: Any) -> Any:
    if isinstance(value, float):
        return struct.pack("<d", value).hex()
    if isinstance(value, dict):
        return {k: _bits(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bits(v) for v in value]
    return value


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _run(model: Any, stream: list[tuple[dict, Any]], predict_first: bool) -> tuple[list, int]:
    """predict_learn_one (or learn_one) over the stream; every refused example must leave the
    state byte-identical; returns the outcomes and the number refused."""
    out: list = []
    refused = 0
    for x, y in stream:
        before = json.dumps(model.get_state(), allow_nan=False)
        try:
            if predict_first:
                out.append(model.predict_learn_one(x, y))
            else:
                model.learn_one(x, y)
                out.append("learned")
        except ValueTooLargeError as e:
            assert e.reason == VALUE_TOO_LARGE == "value_too_large"
            assert isinstance(e, RecordError)
            assert json.dumps(model.get_state(), allow_nan=False) == before
            out.append("refused")
            refused += 1
        assert _finite(model.get_state())
    return out, refused


def _learns_on(outcomes: list) -> None:
    """Good examples come after the refused ones and are learned (not all refused: with
    ``bias="r2"`` and R near 1e154 every later mistake would overflow the bias, and is refused
    too)."""
    first = outcomes.index("refused")
    assert any(o != "refused" for o in outcomes[first:])


def _pure(module: Any):
    class Off:
        def __enter__(self) -> None:
            self.saved = module._speedups
            module._speedups = None

        def __exit__(self, *exc: Any) -> None:
            module._speedups = self.saved

    return Off()


@pytest.mark.parametrize("predict_first", [True, False])
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_binary_refuses_and_stays_finite(config, predict_first):
    stream = [(x, [-1, 1][y]) for x, y in _stream(2)]
    helped = Perceptron(**config)
    got, refused = _run(helped, stream, predict_first)
    pure = Perceptron(**config)
    with _pure(perceptron_module):
        want, _ = _run(pure, stream, predict_first)
    assert got == want
    assert _bits(helped.get_state()) == _bits(pure.get_state())
    assert list(helped._w) == list(pure._w) and list(helped._u) == list(pure._u)
    assert refused >= 8
    _learns_on(got)


@pytest.mark.parametrize("predict_first", [True, False])
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_multiclass_refuses_and_stays_finite(config, predict_first):
    stream = [(x, ["red", "green", "blue"][y]) for x, y in _stream(3)]
    helped = MulticlassPerceptron(**config)
    got, refused = _run(helped, stream, predict_first)
    pure = MulticlassPerceptron(**config)
    with _pure(multiclass_model_module):
        want, _ = _run(pure, stream, predict_first)
    assert got == want
    assert _bits(helped.get_state()) == _bits(pure.get_state())
    assert refused >= 8
    _learns_on(got)


def test_centroid_refuses_and_stays_finite():
    model = CentroidClassifier()
    out, refused = _run(model, [(x, ["r", "g"][y]) for x, y in _stream(2)], True)
    assert refused >= 8
    _learns_on(out)
    # a class's squared norm that grows past float: each example alone is fine
    model = CentroidClassifier()
    for _ in range(3):
        with contextlib.suppress(ValueTooLargeError):
            model.learn_one({"a": 1e154}, "r")  # the second and third refused
    assert model.n_seen == 1 and _finite(model.get_state())
    model.learn_one({"a": 1.0}, "r")
    assert model.n_seen == 2


def test_accumulation_over_many_updates_is_refused():
    """Each example is fine alone; the averaging accumulator they add up to would overflow:
    every example a mistake, u += (t - 1) * step grows with t."""
    for speedups in (perceptron_module._speedups, None):
        saved = perceptron_module._speedups
        perceptron_module._speedups = speedups
        try:
            model = Perceptron(lr=1e305, averaged=True, bias="none")
            refused = 0
            for i in range(5000):
                try:
                    model.learn_one({"a": 1.0}, i % 2 == 0)
                except ValueTooLargeError:
                    refused += 1
        finally:
            perceptron_module._speedups = saved
        assert refused > 1000 and _finite(model.get_state())
        assert model.n_seen + refused == 5000


def test_r2_bias_overflow_is_refused_although_r_is_finite():
    state = Perceptron(bias="r2").get_state()
    state.update(weights=[["a", -1e300]], bias=1.7e308, n_seen=1, n_mistakes=1)
    state["labels"] = {"encoding": "-1/+1", "settled": True}
    model = Perceptron.from_state(state)
    before = model.get_state()
    with pytest.raises(ValueTooLargeError, match="bias"):
        model.learn_one({"a": 1.3e154}, 1)  # a mistake: b + R^2 = inf, R and w finite
    assert model.get_state() == before
    model = MulticlassPerceptron(bias="r2")
    with pytest.raises(ValueTooLargeError, match="R"):
        model.learn_one({"a": 1e160}, "x")  # R^2 = inf: R itself
    assert model.classes == [] and model.n_seen == 0


def test_label_encoding_unchanged_by_a_refused_example():
    model = Perceptron()
    with pytest.raises(ValueTooLargeError):
        model.predict_learn_one({"a": 1e200}, -1)  # would settle the -1/+1 encoding
    assert model.get_state() == Perceptron().get_state()
    model.learn_one({"a": 1.0}, True)  # the encoding is still open: bool is fine
    assert model.predict_one({"a": 1.0}) is True


def test_a_non_finite_score_predicts_but_is_not_stored():
    model = Perceptron()
    model.learn_one({"a": 1e150}, True)
    assert model.predict_one({"a": 1e300}) is True  # 1e300 * 1e300 = inf > 0
    model = Perceptron()
    model.learn_one({"a": 1e150, "b": -1e150}, True)
    assert model.predict_one({"a": 1e300, "b": 1e300}) is False  # inf - inf: NaN, negative
    assert _finite(model.get_state())


@pytest.mark.skipif(native.dense is None, reason="the C extension is not built")
@pytest.mark.parametrize("config", [c for c in CONFIGS if c["init"] == "zeros"], ids=[
    i for c, i in zip(CONFIGS, IDS) if c["init"] == "zeros"])  # fmt: skip
def test_dense_kernels_refuse_the_block_and_write_nothing(config):
    features = ["a", "b"]
    X = np.array([[1.0, -2.0], [-0.5, 3.0], [1e200, 0.0], [2.0, 2.0]])
    binary = Perceptron(**config)
    binary.learn_one({"a": 1.0, "b": 1.0}, 1)
    before = _bits(binary.get_state())
    with pytest.raises(ValueTooLargeError) as e:
        binary.learn_dense(features, X, np.array([1, -1, 1, -1], dtype=np.int8))
    assert e.value.row == 2  # type: ignore[attr-defined]
    assert _bits(binary.get_state()) == before
    model = MulticlassPerceptron(**{**config, "averaged": False})
    model.learn_one({"a": 1.0}, "red")
    before = _bits(model.get_state())
    with pytest.raises(ValueTooLargeError) as e:
        model.learn_dense(features, X, ["red", "blue", "red", "blue"])
    assert e.value.row == 2  # type: ignore[attr-defined]
    assert _bits(model.get_state()) == before
    # a weight overflowing, R finite
    big = np.array([[1e303, 1.0], [-1e303, 1.0], [1e303, 1.0]])
    model = Perceptron(**{**config, "lr": 1e6})
    with pytest.raises(ValueTooLargeError):
        model.learn_dense(features, big, np.array([1, -1, 1], dtype=np.int8))
    assert model.n_seen == 0


@pytest.mark.parametrize("make", [MulticlassPerceptron, CentroidClassifier])
def test_booleans_are_not_merged_with_numbers(make):
    model = make()
    model.learn_one({"a": 1.0}, 1)
    model.learn_one({"a": -1.0}, 0)
    before = model.get_state()
    for label in (True, False, np.True_):
        with pytest.raises(LabelError, match="distinct classes"):
            model.learn_one({"a": 2.0}, label)
        assert model.get_state() == before
    model = make()
    model.learn_one({"a": 1.0}, True)
    with pytest.raises(LabelError):
        model.learn_one({"a": 1.0}, 1)
    with pytest.raises(LabelError):
        model.learn_one({"a": 1.0}, 1.0)
    model.learn_one({"a": -1.0}, False)
    model.learn_one({"a": 3.0}, 2)  # other numbers are fine
    model.learn_one({"a": 3.0}, "1")
    assert model.classes == [True, False, 2, "1"]
    again = type(model).from_state(json.loads(json.dumps(model.get_state())))
    assert again.classes == [True, False, 2, "1"]
    assert [type(c) for c in again.classes] == [bool, bool, int, str]
