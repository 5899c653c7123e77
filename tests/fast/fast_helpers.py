"""The reference (the pure-Python predict_learn_one loop) and bit-exact comparisons for
tests/fast: the C tier (``learn_dense``, the scanners) against the Python one."""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import stream_perceptron.learners._multiclass_model as multiclass_model_module
import stream_perceptron.learners.passive_aggressive as pa_module
import stream_perceptron.learners.perceptron as perceptron_module
import stream_perceptron.learners.scaling as scaling_module
from stream_perceptron import Perceptron, native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners.binary_blocks import encode_labels
from stream_perceptron.learners.labels import predicted_label

MODES = [
    dict(bias=bias, averaged=averaged, lr=lr)
    for bias, averaged, lr in itertools.product(
        ("learned", "r2", "none"), (False, True), (1.0, 0.1)
    )
]
MODE_IDS = [f"{m['bias']}-{'avg' if m['averaged'] else 'plain'}-lr{m['lr']}" for m in MODES]

HAS_C = native.dense is not None

#: What the helpers give for an example the learner refused (ValueTooLargeError).
REFUSED = "<refused: value_too_large>"
needs_c = pytest.mark.skipif(not HAS_C, reason="the C extension is not built")


@contextmanager
def pure_python() -> Iterator[None]:
    """The learners' per-record code with their C helpers off: the pure-Python reference."""
    modules = (perceptron_module, multiclass_model_module, pa_module)
    saved = [m._speedups for m in modules], scaling_module._speedup
    for m in modules:
        m._speedups = None
    scaling_module._speedup = None
    try:
        yield
    finally:
        for m, helpers in zip(modules, saved[0], strict=True):
            m._speedups = helpers
        scaling_module._speedup = saved[1]


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


def reference(model: Any, features: list, X: np.ndarray, labels: list) -> list:
    """The dict path in pure Python: predict_learn_one per row (predict_one for an unlabelled
    row, None; :data:`REFUSED` for a row the learner refuses)."""
    with pure_python():
        return per_record(model, features, X, labels)


def per_record(model: Any, features: list, X: np.ndarray, labels: list) -> list:
    """predict_learn_one per row (predict_one when unlabelled, :data:`REFUSED` when refused,
    the model then checked unchanged)."""
    out = []
    for row, y in zip(X.tolist(), labels):
        x = dict(zip(features, row))
        if y is None:
            out.append(model.predict_one(x))
            continue
        # get_state() builds new containers (its floats are immutable), so the state as it
        # was is kept without bits(): bits() of every row's state was most of the CPU of
        # tests/fast (a third of `make check`'s); it runs on a refusal only
        before = model.get_state()
        try:
            out.append(model.predict_learn_one(x, y))
        except ValueTooLargeError:
            assert bits(model.get_state()) == bits(before)
            out.append(REFUSED)
    return out


def run_fast(model: Perceptron, features: list, X: np.ndarray, labels: list) -> list:
    """learn_dense with the labels encoded as the engine does it; the decoded predictions. A
    block the kernel refuses (at ``row``) leaves the model as it was: then the rows before it
    densely, that row per record (refused there too), the rest densely."""
    if not len(X):
        return []
    encoding = model.label_encoding
    before = model.get_state()  # compared as bits() on a refusal only (see per_record)
    signs, encodings, errors = encode_labels(model, labels)
    assert not errors
    try:
        preds = model.learn_dense(features, X, signs)
    except ValueTooLargeError as e:
        model.label_encoding = encoding
        assert bits(model.get_state()) == bits(before)
        i = e.row  # type: ignore[attr-defined]
        out = run_fast(model, features, X[:i], labels[:i])
        refused = per_record(model, features, X[i : i + 1], labels[i : i + 1])
        assert refused == [REFUSED]
        return out + refused + run_fast(model, features, X[i + 1 :], labels[i + 1 :])
    assert preds.dtype == np.int8
    return [predicted_label(e, p > 0) for p, e in zip(preds.tolist(), encodings)]


def check(make, features, X, labels, chunks=None):
    """learn_dense (in ``chunks`` if given) and the reference agree on everything."""
    want_model, got_model = make(), make()
    want = reference(want_model, features, X, labels)
    if chunks is None:
        got = run_fast(got_model, features, X, labels)
    else:
        got = []
        for a, b in itertools.pairwise([0, *chunks, len(X)]):
            got += run_fast(got_model, features, X[a:b], labels[a:b])
    assert [type(p) for p in got] == [type(p) for p in want]
    assert got == want
    assert_same_model(got_model, want_model)
    return want_model
