"""The perceptron convergence theorem as a property: mistakes <= (R/gamma)^2."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron


def _separable(seed: int, n: int, d: int, gamma: float, offset: float):
    """Points with y*(u.x + b) >= gamma for a unit u; returns (data, gamma_actual)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X, y = [], []
    while len(X) < n:
        x = rng.uniform(-3, 3, size=d)
        s = u @ x + offset
        if abs(s) >= gamma:
            X.append(x)
            y.append(1 if s > 0 else -1)
    X = np.array(X)
    margin = float(np.min(np.array(y) * (X @ u + offset)))
    data = [({j: float(v) for j, v in enumerate(x)}, label) for x, label in zip(X, y)]
    return data, margin, float(np.max(np.linalg.norm(X, axis=1)))


def _train_to_convergence(model, data, max_passes=200):
    for _ in range(max_passes):
        before = model.n_mistakes
        for x, label in data:
            model.learn_one(x, label)
        if model.n_mistakes == before:
            return True
    return False


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.integers(2, 6),
    gamma=st.floats(0.2, 1.0),
)
def test_mistakes_within_novikoff_bound_without_bias(seed, d, gamma):
    data, margin, radius = _separable(seed, 60, d, gamma, offset=0.0)
    model = Perceptron(bias="none")
    assert _train_to_convergence(model, data)
    assert model.n_mistakes <= (radius / margin) ** 2


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.integers(2, 6),
    gamma=st.floats(0.2, 1.0),
    offset=st.floats(-1.5, 1.5),
)
def test_mistakes_within_sarkar_bound_with_r2_bias(seed, d, gamma, offset):
    data, margin, radius = _separable(seed, 60, d, gamma, offset=offset)
    model = Perceptron(bias="r2")
    assert _train_to_convergence(model, data)
    assert model.max_norm == radius
    assert model.n_mistakes <= (2 * radius / margin) ** 2
