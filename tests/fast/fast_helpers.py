"""The reference (the predict_learn_one loop) and bit-exact comparisons for tests/fast."""

from __future__ import annotations

import itertools
import math
import struct
from typing import Any

import numpy as np
import pytest

from stream_perceptron import Perceptron, fast

MODES = [
    dict(bias=bias, averaged=averaged, lr=lr)
    for bias, averaged, lr in itertools.product(
        ("learned", "r2", "none"), (False, True), (1.0, 0.1)
    )
]
MODE_IDS = [f"{m['bias']}-{'avg' if m['averaged'] else 'plain'}-lr{m['lr']}" for m in MODES]

HAS_C = fast._c is not None
HAS_NUMBA = fast.load_numba()

BACKENDS = [
    pytest.param("c", marks=pytest.mark.skipif(not HAS_C, reason="the C extension is not built")),
    pytest.param("numba", marks=pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed")),
    "numpy",
]


def bits(value: Any) -> Any:
    """``value`` with every float replaced by its bit pattern: -0.0 != 0.0, NaN == same NaN."""
    if isinstance(value, float):
        return ("f", struct.pack("<d", value).hex())
    if isinstance(value, dict):
        return {k: bits(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bits(v) for v in value]
    return value


def has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(has_nan(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_nan(v) for v in value)
    return False


def assert_same_model(got: Perceptron, want: Perceptron) -> None:
    """get_state() equal (==, when no NaN makes == meaningless) and bitwise, key order included."""
    a, b = got.get_state(), want.get_state()
    if not has_nan(b):
        assert a == b
    assert bits(a) == bits(b)
    assert list(got._w) == list(want._w)
    assert list(got._u) == list(want._u)
    for v in itertools.chain(got._w.values(), got._u.values(), (got._b, got._ub, got._max_norm)):
        assert type(v) is float
    assert type(got._n_seen) is int and type(got._n_mistakes) is int


def reference(model: Perceptron, features: list, X: np.ndarray, labels: list) -> list:
    """The dict path: predict_learn_one per row (predict_one for an unlabelled row, None)."""
    out = []
    for row, y in zip(X.tolist(), labels):
        x = dict(zip(features, row))
        out.append(model.predict_one(x) if y is None else model.predict_learn_one(x, y))
    return out


def run_fast(model: Perceptron, features: list, X: np.ndarray, labels: list, backend: str) -> list:
    """learn_dense with the labels encoded as the engine does it; the decoded predictions."""
    signs, classes, errors = fast.encode_labels(model, labels)
    assert not errors
    preds = fast.learn_dense(model, features, X, signs, backend=backend)
    assert preds.dtype == np.int8
    return [pos if p > 0 else neg for p, (neg, pos) in zip(preds.tolist(), classes)]


def check(make, features, X, labels, backend, chunks=None):
    """learn_dense (in ``chunks`` if given) and the reference agree on everything."""
    want_model, got_model = make(), make()
    want = reference(want_model, features, X, labels)
    if chunks is None:
        got = run_fast(got_model, features, X, labels, backend)
    else:
        got = []
        for a, b in itertools.pairwise([0, *chunks, len(X)]):
            got += run_fast(got_model, features, X[a:b], labels[a:b], backend)
    assert [type(p) for p in got] == [type(p) for p in want]
    assert got == want
    assert_same_model(got_model, want_model)
    return want_model
