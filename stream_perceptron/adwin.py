"""ADWIN over chunks of the mistake stream, in readable Python: the reference of ``_drift.c``.

ADWIN (Bifet & Gavalda 2007, the ADWIN2 variant with exponential buckets) as River's
``drift.ADWIN`` computes it (River 0.26: the same floating-point operations in the same order,
and the window emptied on the update after a detection, as River's ``update`` does), with the
monitor's chunking around it: the mistakes of each :attr:`ChunkedAdwin.chunk` learned examples
make one value (their mistake rate), and a detection counts as a drift only where the error
rate rose (the rate of the last :attr:`ChunkedAdwin.recent` chunks above the window's mean
before the update).

Why our own: River's ``ADWIN.update`` is fast inside (Rust) but is one Python call per value,
with its properties read around it: checking at every call (clock 1) 0.8 us, some 15 % of the
engine's fastest runs with one call per 8 examples; with clock 32, 0.0158 us an example against
this module's C tier's 0.0079 (benchmarks row 13c). The C tier (:mod:`stream_perceptron._drift`)
runs this same loop over a whole block of mistakes in one call, and its state is JSON where
River's is an opaque serialisation. ``tests/fast/test_adwin.py`` holds this module to River's
ADWIN (the same detections and window statistics on the same values) and the C tier to this
module bit for bit (the same drifts and the same state).

The state is JSON: the window's levels (level ``i`` holds buckets of ``2**i`` values, oldest
first, each ``[total, variance]``), its sums, the clock, and the chunking's counts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from stream_perceptron.errors import StateError

__all__ = ["ChunkedAdwin", "EMPTY_WINDOW", "Window", "window_fields"]

#: ADWIN's settings other than delta and clock, River's defaults
MAX_BUCKETS = 5
MIN_WINDOW_LENGTH = 5
GRACE_PERIOD = 10


#: the fields of a window that holds nothing (``window_fields``' order)
EMPTY_WINDOW: tuple[float, float, float, list[list[list[float]]], int, bool] = (
    0.0, 0.0, 0.0, [[]], 0, False
)  # fmt: skip


class Window:
    """ADWIN's adaptive window of values.

    Examples
    --------
    >>> w = Window(delta=0.002)
    >>> [w.update(v) for v in [0.0] * 200 + [1.0] * 40].count(True) >= 1
    True
    """

    def __init__(self, delta: float = 0.002, clock: int = 1) -> None:
        self.delta, self.clock = delta, clock
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.variance = 0.0
        self.width = 0.0
        self.levels: list[list[list[float]]] = [[]]
        self.tick = 0  # values since the window started: checked every ``clock``
        self.detected = False  # the last update detected a change: the next one starts afresh

    @property
    def estimation(self) -> float:
        return self.total / self.width if self.width else 0.0

    def update(self, value: float) -> bool:
        """Add ``value``; whether the window dropped its older part (a change)."""
        if self.detected:
            self.reset()
        self._insert(value)
        self.detected = self._detect()
        return self.detected

    def _insert(self, value: float) -> None:
        self.levels[0].append([value, 0.0])
        self.width += 1.0
        incremental = 0.0
        if self.width > 1.0:
            d = value - self.total / (self.width - 1.0)
            incremental = (self.width - 1.0) * d * d / self.width
        self.variance += incremental
        self.total += value
        # compress: a level with MAX_BUCKETS + 1 buckets merges its two oldest into the next
        i = 0
        while len(self.levels[i]) == MAX_BUCKETS + 1:
            n = float(1 << i)
            (t0, v0), (t1, v1) = self.levels[i][0], self.levels[i][1]
            mu1, mu2 = t0 / n, t1 / n
            merged = [t0 + t1, v0 + v1 + n * 0.5 * (mu1 - mu2) * (mu1 - mu2)]
            if i + 1 == len(self.levels):
                self.levels.append([])
            self.levels[i + 1].append(merged)
            del self.levels[i][:2]
            if len(self.levels[i + 1]) <= MAX_BUCKETS:
                break
            i += 1

    def _drop_oldest(self) -> None:
        last = len(self.levels) - 1
        n = float(1 << last)
        u, v = self.levels[last][0]
        mu = u / n
        self.width -= n
        self.total -= u
        mu_window = self.total / self.width
        self.variance -= v + n * self.width * (mu - mu_window) * (mu - mu_window) / (n + self.width)
        del self.levels[last][0]
        if not self.levels[last] and last > 0:
            self.levels.pop()

    def _detect(self) -> bool:
        self.tick += 1
        if self.tick % self.clock or not self.width > GRACE_PERIOD:
            return False
        changed, again = False, True
        while again:
            again = False
            n0, n1, u0, u1 = 0.0, self.width, 0.0, self.total
            for i in range(len(self.levels) - 1, -1, -1):
                size = float(1 << i)
                level = self.levels[i]
                for k, (t, _v) in enumerate(level):
                    n0 += size
                    n1 -= size
                    u0 += t
                    u1 -= t
                    if i == 0 and k == len(level) - 1:
                        break
                    if (n1 >= MIN_WINDOW_LENGTH and n0 >= MIN_WINDOW_LENGTH
                            and self._cut(n0, n1, u0 / n0 - u1 / n1)):  # fmt: skip
                        again = changed = True
                        break
                if again:
                    self._drop_oldest()
                    break
        return changed

    def _cut(self, n0: float, n1: float, delta_mean: float) -> bool:
        dp = math.log(2.0 * math.log(self.width) / self.delta)
        m = 1.0 / (n0 - MIN_WINDOW_LENGTH + 1.0) + 1.0 / (n1 - MIN_WINDOW_LENGTH + 1.0)
        eps = math.sqrt(2.0 * m * (self.variance / self.width) * dp) + 2.0 / 3.0 * dp * m
        return abs(delta_mean) > eps

    def get_state(self) -> dict[str, Any]:
        return {"total": self.total, "variance": self.variance, "width": self.width,
                "levels": [[list(b) for b in level] for level in self.levels],
                "tick": self.tick, "detected": self.detected}  # fmt: skip


def window_fields(
    state: Any,
) -> tuple[float, float, float, list[list[list[float]]], int, bool]:
    """A window's state, checked: :class:`StateError` when it is not one (a field of the wrong
    type, a sum outside what values in [0, 1] give, buckets that do not add up)."""
    try:
        total, variance, width = (_real(state[k], k) for k in ("total", "variance", "width"))
        levels = [[[_real(t, "levels"), _real(v, "levels")] for t, v in level]
                  for level in state["levels"]]  # fmt: skip
        tick, detected = state["tick"], state["detected"]
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise StateError(f"corrupt drift window: {e}") from None
    held = sum(len(level) * (1 << i) for i, level in enumerate(levels))
    if (not levels or len(levels) > 62 or any(len(lv) > MAX_BUCKETS for lv in levels)
            or held != width or type(tick) is not int or not 0 <= tick < 2**62
            or not isinstance(detected, bool)):  # fmt: skip
        raise StateError("corrupt drift window: its buckets do not add up")
    # each value is a mistake rate in [0, 1]: a sum of n of them is in [0, n], and so is their
    # squared deviation (n / 4 at most); a little slack for the rounding of long runs. A sum far
    # outside (-1e308) overflows the window's statistics later, at the run's final save.
    slack = 1e-6 * (1.0 + width)
    for name, value in (("total", total), ("variance", variance)):
        if not -slack <= value <= width + slack:
            raise StateError(f"corrupt drift window: {name} is {value!r}, outside 0 to {width:g}")
    if not all(-slack <= t <= (1 << i) + slack and -slack <= v <= (1 << i) + slack
               for i, level in enumerate(levels) for t, v in level):  # fmt: skip
        raise StateError("corrupt drift window: levels hold a sum outside what rates give")
    return total, variance, width, levels, tick, detected


def _real(value: Any, name: str) -> float:
    # a JSON number (not a bool, not a string float() would take), finite
    if type(value) not in (float, int) or not -math.inf < value < math.inf:
        raise ValueError(f"{name} holds {value!r}, not a finite number")
    return float(value)


class ChunkedAdwin:
    """ADWIN fed the mistake rate of each ``chunk`` learned examples; only a rise is a drift.

    Parameters
    ----------
    delta
        ADWIN's confidence.
    chunk
        Learned examples per ADWIN value.
    recent
        Chunks whose mistake rate is "the recent rate" that tells a rise from a fall.
    clock
        ADWIN checks its window every ``clock`` chunks (a check costs about 0.3 us in C: it
        tries every bucket boundary as a cut).

    Examples
    --------
    >>> monitor = ChunkedAdwin()
    >>> drifts = monitor.observe([i % 20 == 0 for i in range(5_000)]
    ...                          + [i % 3 == 0 for i in range(2_000)])
    >>> len(drifts) >= 1 and 5_000 < drifts[0] <= 6_000
    True
    """

    def __init__(
        self, delta: float = 0.002, chunk: int = 8, recent: int = 16, clock: int = 1
    ) -> None:
        self.delta, self.chunk, self.recent, self.clock = delta, chunk, recent, clock
        self.window = Window(delta, clock)
        self.seen = 0  # learned examples observed
        self.open_sum = 0  # mistakes of the open chunk
        self.recent_sums: deque[int] = deque(maxlen=recent)

    def observe(self, mistakes: Sequence[bool]) -> list[int]:
        """Feed the mistakes of learned examples, in order; the positions (examples seen) of
        the drifts found, each at the end of the chunk that revealed it."""
        drifts = []
        for m in mistakes:
            self.open_sum += bool(m)
            self.seen += 1
            if self.seen % self.chunk == 0 and self._close_chunk():
                drifts.append(self.seen)
        return drifts

    def _close_chunk(self) -> bool:
        before = self.window.estimation
        detected = self.window.update(self.open_sum / self.chunk)
        self.recent_sums.append(self.open_sum)
        self.open_sum = 0
        recent = sum(self.recent_sums) / (self.chunk * len(self.recent_sums))
        return detected and recent > before

    def get_state(self) -> dict[str, Any]:
        return {"seen": self.seen, "open_sum": self.open_sum,
                "recent": list(self.recent_sums), "window": self.window.get_state()}  # fmt: skip

    def _set(
        self, seen: int, open_sum: int, recent: list[int], total: float, variance: float,
        width: float, levels: list[list[list[float]]], tick: int, detected: bool,
    ) -> None:
        """Continue from a state checked by :func:`window_fields` and the caller (the C tier's
        ``_set``, the same arguments)."""
        w = self.window
        w.total, w.variance, w.width, w.tick, w.detected = total, variance, width, tick, detected
        w.levels = [[list(b) for b in level] for level in levels]
        self.seen, self.open_sum = seen, open_sum
        self.recent_sums = deque(recent, maxlen=self.recent)
