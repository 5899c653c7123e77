"""The two tiers give the same bits: every learner configuration over the same streams.

Tier 1 is the C extension: ``learn_dense`` (the dense kernels, fed in blocks of varying sizes)
where the learner is ``dense_capable``, and the per-record path with the dict API's C helpers
(``_speedups``) in every configuration. Tier 2 is the readable pure-Python reference: the
learners' own ``predict_learn_one``/``predict_one`` with the C helpers turned off. Each must
leave the same model: weights (bitwise, same key order), biases, averaging accumulators,
``n_seen``, ``n_mistakes``, ``max_norm``, and make the same predictions.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from example_counts import examples
from fast_helpers import REFUSED, bits, needs_c, per_record, pure_python, reference, run_fast
from river import datasets

from stream_perceptron import (
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
)
from stream_perceptron.errors import ValueTooLargeError

pytestmark = needs_c

BINARY = [
    dict(bias=bias, averaged=averaged, init=init, lr=lr, seed=7)
    for bias, averaged, init, lr in itertools.product(
        ("learned", "r2", "none"), (False, True), ("zeros", "random"), (1.0, 0.25)
    )
]
MULTICLASS = [
    dict(bias=bias, averaged=averaged, init=init, lr=lr, seed=7)
    for bias, averaged, init, lr in itertools.product(
        ("learned", "r2", "none"), (False, True), ("zeros", "random"), (1.0, 0.25)
    )
]
# the forgetting average (per record in both tiers: the C helpers against pure Python), with
# half-lives short enough for the accumulators to be rescaled within the streams
FORGETTING = [
    dict(bias="learned", averaged=True, init="zeros", lr=1.0, seed=7, average_half_life=1.5),
    dict(bias="r2", averaged=True, init="random", lr=0.25, seed=7, average_half_life=0.7),
    dict(bias="none", averaged=True, init="zeros", lr=0.25, seed=7, average_half_life=50),
]
BINARY += FORGETTING
MULTICLASS += FORGETTING


def _ids(configs: list[dict]) -> list[str]:
    return [
        f"{c['bias']}-{'avg' if c['averaged'] else 'plain'}-{c['init']}-lr{c['lr']}"
        + (f"-hl{c['average_half_life']}" if "average_half_life" in c else "")
        for c in configs
    ]


# -- streams: (features, X, labels), labels None for an unlabelled row -------------------------


def _gaussian(seed: int, n: int, d: int, unlabelled: float) -> tuple[list, np.ndarray, list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, size=d)
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 + rng.normal(scale=0.5, size=n) > 0, 1, -1).tolist()
    labels = [None if rng.random() < unlabelled else v for v in y]
    return [f"f{j}" for j in range(d)], X, labels


def _cancelling(seed: int, n: int = 400, d: int = 12) -> tuple[list, np.ndarray, list]:
    """Sums that cancel to exact zeros, or lose small terms, depending on their order."""
    rng = np.random.default_rng(seed)
    X = rng.choice([1e8, -1e8, 1e16, -1e16, 1.0, -1.0, 3.0, 0.1, -0.3, 0.0, -0.0], size=(n, d))
    labels = [None if rng.random() < 0.1 else int(v) for v in rng.choice([-1, 1], size=n)]
    return [f"c{j}" for j in range(d)], X, labels


def _extreme(seed: int, n: int = 300, d: int = 3) -> tuple[list, np.ndarray, list]:
    """Huge and tiny magnitudes: sums overflow to inf, then inf - inf makes NaN weights."""
    rng = np.random.default_rng(seed)
    X = rng.choice([1e300, -1e300, 1.7e308, -1.7e308, 1e-300, 1.0, -1.0, 0.0], size=(n, d))
    labels = [None if rng.random() < 0.1 else int(v) for v in rng.choice([-1, 1], size=n)]
    return [f"e{j}" for j in range(d)], X, labels


def _phishing() -> tuple[list, np.ndarray, list]:
    rows = list(datasets.Phishing())
    features = list(rows[0][0])
    X = np.array([[x[k] for k in features] for x, _ in rows], dtype=np.float64)
    return features, X, [y for _, y in rows]


BINARY_STREAMS = {
    "gaussian": _gaussian(0, examples(1500), 8, 0.0),
    "gaussian-unlabelled": _gaussian(1, examples(1500), 5, 0.25),
    "cancelling": _cancelling(2),
    "extreme": _extreme(3),
    "phishing": _phishing(),
}


def _multiclass_stream(
    seed: int, n: int, d: int, unlabelled: float, wide: bool = False, n_classes: int = 4
):
    rng = np.random.default_rng(seed)
    if wide:  # 1e16 + 1 + 1 + 1: a plain left fold of R's squares differs from Neumaier's
        X = rng.choice([1e8, -1e8, 1.0, -1.0, 0.5], size=(n, d))
        X[:, 0] = rng.choice([1e8, -1e8], size=n)
    else:
        X = rng.normal(size=(n, d))
    centres = rng.normal(size=(n_classes, d))
    names: list[Any] = ["red", "green", "blue", 3, *range(4, n_classes)]
    labels: list[Any] = []
    for i, row in enumerate(X):
        c = int(np.argmax(centres @ row))
        label = names[c]
        if i < n // 3 and label == 3:
            label = "red"  # the fourth class first comes a third of the way in
        labels.append(None if rng.random() < unlabelled else label)
    return [f"m{j}" for j in range(d)], X, labels


MULTICLASS_STREAMS = {
    "gaussian": _multiclass_stream(3, examples(1500), 6, 0.0),
    "gaussian-unlabelled": _multiclass_stream(4, examples(1500), 4, 0.2),
    "wide-r": _multiclass_stream(5, 300, 4, 0.1, wide=True),
    # 11 classes: the dense kernel scores them four, four, two and one at a time
    "eleven-classes": _multiclass_stream(6, examples(1500), 7, 0.1, n_classes=11),
}

BLOCKS = [1, 2, 7, 64, 300]  # block sizes, cycled: blocks of one row and long ones


def _blocks(n: int) -> list[tuple[int, int]]:
    out, start = [], 0
    for size in itertools.cycle(BLOCKS):
        if start >= n:
            return out
        out.append((start, min(n, start + size)))
        start += size
    raise AssertionError  # unreachable


# -- the tiers ---------------------------------------------------------------------------------


def _dense_binary(model: Perceptron, features: list, X: np.ndarray, labels: list) -> list:
    out: list = []
    for a, b in _blocks(len(X)):
        # a refused block: the rows before densely, that one per record, the rest densely
        out += run_fast(model, features, X[a:b], labels[a:b])
    return out


def _dense_multiclass(model: MulticlassPerceptron, features, X, labels) -> list:
    out: list = []
    for a, b in _blocks(len(X)):
        out += _dense_multiclass_rows(model, features, X[a:b], labels[a:b])
    return out


def _dense_multiclass_rows(model: MulticlassPerceptron, features, X, labels) -> list:
    """learn_dense; a refused block (the model as it was): the rows before it densely, that
    row per record (refused there too), the rest densely."""
    if not len(X):
        return []
    before = model.get_state()  # compared as bits() on a refusal only (see per_record)
    try:
        return model.learn_dense(features, X, labels)
    except ValueTooLargeError as e:
        assert bits(model.get_state()) == bits(before)
        i = e.row  # type: ignore[attr-defined]
        out = _dense_multiclass_rows(model, features, X[:i], labels[:i])
        refused = per_record(model, features, X[i : i + 1], labels[i : i + 1])
        assert refused == [REFUSED]
        return out + refused + _dense_multiclass_rows(model, features, X[i + 1 :], labels[i + 1 :])


def _with_c_helpers(model: Any, features: list, X: np.ndarray, labels: list) -> list:
    return per_record(model, features, X, labels)


def _state(model: Any) -> Any:
    """Everything a learner holds, floats as bit patterns, dicts as ordered pairs."""
    return bits(model.get_state()), bits(
        [model._n_seen, model._n_mistakes, model._max_norm, _ordered(model._w), _ordered(model._u)]
    )


def _ordered(d: dict) -> list:
    return [(k, _ordered(v) if isinstance(v, dict) else v) for k, v in d.items()]


def _check(make, stream, dense) -> Any:
    features, X, labels = stream
    pure = make()
    want = reference(pure, features, X, labels)  # pure Python: the C helpers off
    helped = make()
    got = _with_c_helpers(helped, features, X, labels)
    assert got == want and [type(p) for p in got] == [type(p) for p in want]
    assert _state(helped) == _state(pure)
    model = make()
    if model.dense_capable:
        got = dense(model, features, X, labels)
        assert got == want and [type(p) for p in got] == [type(p) for p in want]
        assert _state(model) == _state(pure)
    else:
        assert model._init.random
    return pure


@pytest.mark.parametrize("stream", list(BINARY_STREAMS))
@pytest.mark.parametrize("config", BINARY, ids=_ids(BINARY))
def test_binary_tiers_equal(config, stream):
    pure = _check(lambda: Perceptron(**config), BINARY_STREAMS[stream], _dense_binary)
    assert pure.n_mistakes >= 2  # r2 on the extreme stream: NaN weights after 2 mistakes


@pytest.mark.parametrize("stream", list(MULTICLASS_STREAMS))
@pytest.mark.parametrize("config", MULTICLASS, ids=_ids(MULTICLASS))
def test_multiclass_tiers_equal(config, stream):
    pure = _check(lambda: MulticlassPerceptron(**config), MULTICLASS_STREAMS[stream],
                  _dense_multiclass)  # fmt: skip
    assert pure.n_mistakes > 10 and len(pure.classes) == (11 if stream == "eleven-classes" else 4)


def test_the_dense_tier_ran_where_it_should():
    capable = [Perceptron(**c).dense_capable for c in BINARY]
    assert capable == [c["init"] == "zeros" for c in BINARY]  # the forgetting average too
    capable = [MulticlassPerceptron(**c).dense_capable for c in MULTICLASS]
    assert capable == [c["init"] == "zeros" for c in MULTICLASS]  # the forgetting one too


def test_without_c_the_engine_runs_the_python_tier():
    """STREAM_PERCEPTRON_NO_C=1: no learner is dense-capable, the engine runs per record and
    learns the same model."""
    code = (
        "import io, json\n"
        "from connectors import LineSource\n"
        "from stream_perceptron import MulticlassPerceptron, Perceptron, native\n"
        "from stream_perceptron.engine import Engine\n"
        "from stream_perceptron.formats import make_parser\n"
        "assert native.dense is None\n"
        "data = b'a,b,y\\n' + b''.join(b'%r,%r,%d\\n' % (i / 7, -i / 3, i % 3 == 0)"
        " for i in range(3000))\n"
        "out = []\n"
        "for m in (Perceptron(), MulticlassPerceptron()):\n"
        "    e = Engine(m, make_parser('csv'))\n"
        "    assert not m.dense_capable and e._blocks is None\n"
        "    e.run(LineSource(io.BytesIO(data)))\n"
        "    out.append(m.get_state())\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "STREAM_PERCEPTRON_NO_C": "1"}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    import io
    import json

    from connectors import LineSource
    from stream_perceptron.engine import Engine
    from stream_perceptron.formats import make_parser

    data = b"a,b,y\n" + b"".join(b"%r,%r,%d\n" % (i / 7, -i / 3, i % 3 == 0) for i in range(3000))
    want = []
    for m in (Perceptron(), MulticlassPerceptron()):
        e = Engine(m, make_parser("csv"))
        assert e._blocks is not None  # here, with C: the dense tier
        e.run(LineSource(io.BytesIO(data)))
        want.append(m.get_state())
    assert json.loads(run.stdout) == json.loads(json.dumps(want))


# -- the passive-aggressive learner: its dict API's C helpers (dot_sq, dot_norm, axpy_finite)
# against the pure-Python loops, and its kernel, over the binary streams ----------------------

PA = [
    dict(variant=variant, C=C, bias=bias)
    for variant, C, bias in itertools.product(
        ("pa", "pa1", "pa2"), (0.01, 1.0), ("learned", "none")
    )
]


def _pa_state(model: PassiveAggressive | MulticlassPassiveAggressive) -> Any:
    return bits(model.get_state()), bits(
        [model._n_seen, model._n_mistakes, model._max_norm, _ordered(model._w), model._b]
    )


def _check_pa(make, stream, dense) -> Any:
    """The pure-Python loops, the C helpers (per record) and the kernel (``dense``): the same
    predictions and the same model."""
    features, X, labels = stream
    pure = make()
    want = reference(pure, features, X, labels)
    for tier in (per_record, dense):
        model = make()
        got = tier(model, features, X, labels)
        assert got == want and [type(p) for p in got] == [type(p) for p in want]
        assert _pa_state(model) == _pa_state(pure)
    return pure


@pytest.mark.parametrize("stream", list(BINARY_STREAMS))
@pytest.mark.parametrize("config", PA, ids=[f"{c['variant']}-C{c['C']}-{c['bias']}" for c in PA])
def test_passive_aggressive_tiers_equal(config, stream):
    """Its dict API's C helpers (dot_sq, dot_norm, axpy_finite) and its kernel."""
    pure = _check_pa(lambda: PassiveAggressive(**config), BINARY_STREAMS[stream], _dense_binary)
    assert pure.n_mistakes >= 2


def test_the_passive_aggressive_helpers_decline_what_python_decides():
    """dot_sq declines (None) what its Python loop must decide: a value past 2**53, a value of
    another type, a weight that is not a float; the learner then runs that loop."""
    helpers = pytest.importorskip("stream_perceptron._speedups")
    assert helpers.dot_sq({"a": 2.0}, {"a": 3.0, "b": -1.5}) == (11.25, 6.0)
    assert helpers.dot_sq({"a": 2.0}, {"a": 2**53 + 1}) is None
    assert helpers.dot_sq({"a": 2.0}, {"a": "3"}) is None
    assert helpers.dot_sq({"a": 2}, {"a": 3.0}) is None
    stream = [({"a": 2**60, "b": 1.0}, 1), ({"a": 1e154, "b": 1e154}, -1), ({"a": 3}, -1),
              ({"b": 0.5, "a": -2.0}, 1)]  # fmt: skip
    model, ref = PassiveAggressive(), PassiveAggressive()
    got, want = [], []
    for x, y in stream:
        got.append(_pa_outcome(model, x, y))
    with pure_python():
        for x, y in stream:
            want.append(_pa_outcome(ref, x, y))
    assert got == want and got[1] == REFUSED  # sq overflows: refused, the model as it was
    assert _pa_state(model) == _pa_state(ref)


def _pa_outcome(model: PassiveAggressive, x: dict, y: Any) -> Any:
    try:
        return model.predict_learn_one(x, y)
    except ValueTooLargeError:
        return REFUSED


@pytest.mark.parametrize("stream", list(MULTICLASS_STREAMS))
@pytest.mark.parametrize("config", PA, ids=[f"{c['variant']}-C{c['C']}-{c['bias']}" for c in PA])
def test_multiclass_passive_aggressive_tiers_equal(config, stream):
    """Its dict API's C helpers (class_scores, dot_sq, axpy_finite) and its kernel."""
    pure = _check_pa(
        lambda: MulticlassPassiveAggressive(**config), MULTICLASS_STREAMS[stream],
        _dense_multiclass,
    )  # fmt: skip
    assert pure.n_mistakes > 10
