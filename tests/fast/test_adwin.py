"""The drift detector's two tiers: the readable ADWIN (stream_perceptron/adwin.py) is River's
``drift.ADWIN`` to the last bit (the same detections, window width, sum and variance on the same
values), and the C tier (``_drift.c``) is the readable one to the last bit (the same drifts at
the same positions, the same state) over blocks of any size and restores from JSON."""

from __future__ import annotations

import json
import logging
import random

import pytest
from river import drift

from stream_perceptron import native
from stream_perceptron.adwin import ChunkedAdwin, Window, window_fields
from stream_perceptron.drift import CHUNK, DriftMonitor
from stream_perceptron.errors import StateError

needs_c = pytest.mark.skipif(native.drift is None, reason="the C extension is not built")


def _rates(seed: int, n: int, segment: int) -> list[float]:
    """Chunk mistake rates that switch between two levels every ``segment`` values."""
    rng = random.Random(seed)
    low, high = rng.uniform(0.0, 0.3), rng.uniform(0.1, 0.6)
    return [
        sum(rng.random() < (low if (i // segment) % 2 == 0 else high) for _ in range(CHUNK))
        / CHUNK
        for i in range(n)
    ]


@pytest.mark.parametrize("clock", [1, 4, 32])
@pytest.mark.parametrize("seed", range(4))
def test_the_window_is_rivers_adwin(seed, clock):
    theirs, ours = drift.ADWIN(delta=0.002, clock=clock), Window(0.002, clock)
    detections = 0
    for value in _rates(seed, 6_000, 1_500):
        theirs.update(value)
        assert ours.update(value) == theirs.drift_detected
        assert (ours.width, ours.total, ours.variance) == (
            theirs.width, theirs.total, theirs.variance
        )  # fmt: skip
        assert ours.estimation == theirs.estimation
        detections += theirs.drift_detected
    assert detections >= 1  # the switches were seen: the comparison covered cuts


def _mistakes(seed: int, n: int = 60_000) -> list[bool]:
    rng = random.Random(seed)
    rates = [rng.uniform(0.0, 0.5) for _ in range(6)]
    return [rng.random() < rates[i * 6 // n] for i in range(n)]


@needs_c
@pytest.mark.parametrize("clock", [1, 4, 32])
@pytest.mark.parametrize("seed", range(6))
def test_the_c_tier_is_the_reference_over_any_blocks_and_restores(seed, clock):
    mistakes = _mistakes(seed)
    rng = random.Random(100 + seed)
    c, ref = native.drift.ChunkedAdwin(0.002, CHUNK, 16, clock), ChunkedAdwin(0.002, CHUNK, 16,
                                                                               clock)  # fmt: skip
    found_c, found_ref = [], []
    i = 0
    while i < len(mistakes):
        n = rng.choice([1, 3, CHUNK, 100, 2_500])
        found_c += c.observe(mistakes[i : i + n])
        found_ref += ref.observe(mistakes[i : i + n])
        i += n
        if rng.random() < 0.05:  # through JSON, into fresh objects of both tiers
            state = json.loads(json.dumps(ref.get_state()))
            assert c.get_state() == state
            args = (state["seen"], state["open_sum"], state["recent"],
                    *window_fields(state["window"]))  # fmt: skip
            c = native.drift.ChunkedAdwin(0.002, CHUNK, 16, clock)
            ref = ChunkedAdwin(0.002, CHUNK, 16, clock)
            c._set(*args)
            ref._set(*args)
    assert found_c == found_ref and len(found_ref) >= 1
    assert c.get_state() == ref.get_state()


@needs_c
def test_the_c_tier_takes_any_truthy_values_and_refuses_what_is_not_a_sequence():
    c = native.drift.ChunkedAdwin()
    assert c.observe([0, 1, 1.0, "", None, True, False, 2]) == []
    assert c.seen == 8 and c.get_state()["recent"] == [4]
    with pytest.raises(TypeError):
        c.observe(5)
    with pytest.raises(ValueError):
        native.drift.ChunkedAdwin(0.002, 0)


def test_a_state_of_the_earlier_release_keeps_its_counts_and_starts_the_window_afresh(caplog):
    old = {  # as saved before the window was ours: River's serialised window, base64
        "detector": "adwin", "delta": 0.002, "chunk": 8, "seen": 20_003, "open_sum": 2,
        "recent": [1, 0, 2], "drifts": 2, "first_drift": 1_000, "last_drift": 12_008,
        "positions": [1_000, 12_008], "adwin": "AAAA",
    }  # fmt: skip
    monitor = DriftMonitor()
    with caplog.at_level(logging.WARNING):
        monitor.load_state(old)
    assert "earlier release" in caplog.text
    assert (monitor.seen, monitor.drifts, monitor.last_drift) == (20_003, 2, 12_008)
    state = monitor.get_state()
    assert state["window"]["width"] == 0 and state["open_sum"] == 2
    monitor.observe([True] * 5)  # closes the open chunk at 20,008: 7 mistakes of 8
    assert monitor.get_state()["recent"] == [1, 0, 2, 7]


@pytest.mark.parametrize(
    "change",
    [
        {"window": {"total": 1.0}},
        {"open_sum": 9},
        {"recent": [9]},
        {"seen": "x"},
        {"window": {"total": 0.0, "variance": 0.0, "width": 3.0, "levels": [[[1.0, 0.0]]],
                    "tick": 0, "detected": False}},  # fmt: skip
    ],
)
def test_a_corrupt_state_is_refused(change):
    monitor = DriftMonitor()
    monitor.observe(_mistakes(1, 1_000))
    state = {**monitor.get_state(), **change}
    with pytest.raises(StateError):
        DriftMonitor().load_state(state)


def test_counting_on_from_a_checkpoint_saved_without_a_detector():
    mistakes = _mistakes(3, 30_000)
    whole, resumed = DriftMonitor(), DriftMonitor()
    whole.observe(mistakes)
    resumed.start_at(10_000)
    resumed.observe(mistakes[10_000:])
    assert resumed.seen == whole.seen == 30_000
    # positions are the run's example numbers; the window saw only what came after the resume
    assert all(p > 10_000 for p in resumed.positions)
    assert resumed.drifts >= 1
