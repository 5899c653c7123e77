"""--scale standard under hostile values (issue 29, class 4): whatever finite values come, in
any order, the scaler's statistics stay finite and an ordinary value is still accepted after
them; the C dict path and the Python reference agree on what they refuse."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners import scaling
from stream_perceptron.learners.scaling import Standardizer

VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e200, -1e200, 1.7e308, -1.7e308, 2.0**510, -(2.0**510), 1e-300, 0.0]),
)


def _feed(scaler: Standardizer, values: list[float]) -> list[bool]:
    accepted = []
    for v in values:
        try:
            _, pending = scaler.transform({"a": v})
        except ValueTooLargeError:
            accepted.append(False)
            continue
        scaler.commit(pending)
        accepted.append(True)
    return accepted


@pytest.mark.parametrize("pure", [False, True])
@given(st.lists(VALUES, max_size=30))
def test_the_statistics_stay_finite_and_usable(pure, values):
    with pytest.MonkeyPatch.context() as mp:
        if pure:
            mp.setattr(scaling, "_speedup", None)
        scaler = Standardizer()
        accepted = _feed(scaler, values)
        n, mean, var = scaler.stats("a")
        assert n == sum(accepted) and math.isfinite(mean) and math.isfinite(var) and var >= 0
        assert _feed(scaler, [0.5, -0.5]) == [True, True]  # the feature is not disabled


@given(st.lists(VALUES, max_size=30))
def test_both_paths_refuse_the_same_values(values):
    if scaling._speedup is None:
        pytest.skip("no C extension")
    with_c = _feed(Standardizer(), values)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scaling, "_speedup", None)
        pure = _feed(Standardizer(), values)
    assert with_c == pure
