"""Where a shared-model worker's time goes: seconds per phase, accumulated around each phase
(never per record), beside the wall time and the process's CPU time.

The phases are exclusive: a phase inside another (the leader's fold inside a commit's
transaction, a commit made while the mixer holds at the end) counts in the inner one only,
so they add up to at most the wall time; what no phase holds (polling the input, the engine's
loop between batches) is ``other``. The details are inclusive timers of parts of the phases
(the learner's state taken for an increment, the model rebuilt on a mixture), which say what a
phase's time is made of.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["DETAILS", "PHASES", "Timeline"]

#: the phases, in the order a commit meets them
PHASES = (
    "learn",  # the engine learning and predicting records and blocks
    "increment",  # this worker's increment: the learner's state, the diff, its encoding
    "transaction",  # sending the model topic's records and committing (offsets included)
    "read",  # reading the model topic (read_new) and ingesting it
    "wait",  # waiting: the leader reading its last mixture back, holding at the end
    "fold",  # the leader folding the increments into the next mixture
    "move",  # moving onto a newer mixture (state, translate, from_state, take_over)
    "restore",  # restoring assigned partitions from the model topic
    "join",  # from the start to the first assignment: joining the consumer group
)

#: the inclusive details (see the module's docstring)
DETAILS = (
    "commit",  # the transaction's commit call (offsets included): one per commit
    "increment_get_state",  # shared_state(learner) for an increment
    "increment_diff",  # the diff against the last increment and its encoding
    "move_get_state",  # shared_state(learner) before moving onto a mixture
    "move_translate",  # the mixture plus what it does not hold (and the running average)
    "move_adopt",  # from_state and take_over: the learner becomes the moved state
)


class _Frame:
    __slots__ = ("inner", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = 0.0  # seconds of the phases inside this one


class Timeline:
    """Seconds and calls per phase of one worker, its wall time and CPU time.

    Parameters
    ----------
    clock, cpu
        The wall clock and the process's CPU clock (seconds).

    Examples
    --------
    >>> t = Timeline()
    >>> with t.phase("transaction"):
    ...     with t.phase("fold"):
    ...         pass
    >>> t.add("learn", 0.5)
    >>> s = t.summary()
    >>> s["calls"]["transaction"], s["calls"]["fold"], s["phases"]["learn"]
    (1, 1, 0.5)
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.process_time) -> None:  # fmt: skip
        self._clock = clock
        self._cpu = cpu
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.calls = dict.fromkeys(PHASES, 0)
        self.details = dict.fromkeys(DETAILS, 0.0)
        self.detail_calls = dict.fromkeys(DETAILS, 0)
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: the open phases (a revocation's commit)
        self._span: tuple[str, float, _Frame] | None = None  # an open-ended phase (holding)
        self.begin()

    def begin(self) -> None:
        """Count the wall and CPU time from now."""
        self._wall0, self._cpu0 = self._clock(), self._cpu()
        self._ended: tuple[float, float] | None = None

    def end(self) -> None:
        """Stop the wall and CPU time (an open span ends here)."""
        self.close_span()
        if self._ended is None:
            self._ended = (self._clock() - self._wall0, self._cpu() - self._cpu0)

    def _stack(self) -> list[_Frame]:
        stack: list[_Frame] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _record(self, name: str, total: float, frame: _Frame) -> None:
        """``total`` seconds of phase ``name``, less those of the phases inside it."""
        own = max(0.0, total - frame.inner)
        stack = self._stack()
        if stack:
            stack[-1].inner += total
        elif self._span is not None:
            self._span[2].inner += total
        with self._lock:
            self.seconds[name] += own
            self.calls[name] += 1

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (the phases inside it excluded)."""
        frame = _Frame(name)
        stack = self._stack()
        stack.append(frame)
        started = self._clock()
        try:
            yield
        finally:
            stack.pop()
            self._record(name, self._clock() - started, frame)

    def add(self, name: str, seconds: float) -> None:
        """``seconds`` of phase ``name`` timed by the caller (the engine's batches)."""
        self._record(name, seconds, _Frame(name))

    def current(self) -> str | None:
        """The innermost phase open in this thread, if any."""
        stack = self._stack()
        return stack[-1].name if stack else None

    @contextmanager
    def detail(self, name: str) -> Iterator[None]:
        """Time the block as detail ``name`` (inclusive; the phases do not see it)."""
        started = self._clock()
        try:
            yield
        finally:
            self.add_detail(name, self._clock() - started)

    def add_detail(self, name: str, seconds: float) -> None:
        """``seconds`` of detail ``name`` timed by the caller."""
        with self._lock:
            self.details[name] += seconds
            self.detail_calls[name] += 1

    def open_span(self, name: str) -> None:
        """Start an open-ended phase (the mixer holding at the end), ended by
        :meth:`close_span`; the phases timed meanwhile are excluded from it."""
        if self._span is None:
            self._span = (name, self._clock(), _Frame(name))

    @property
    def span(self) -> str | None:
        """The open-ended phase open, if any."""
        return None if self._span is None else self._span[0]

    def close_span(self) -> None:
        span, self._span = self._span, None
        if span is not None:
            name, started, frame = span
            own = max(0.0, self._clock() - started - frame.inner)
            with self._lock:
                self.seconds[name] += own
                self.calls[name] += 1

    def summary(self) -> dict[str, Any]:
        """Wall and CPU seconds, seconds and calls per phase, ``other`` (the wall time no
        phase holds) and the details: what ``--summary-json`` writes as ``timeline``."""
        wall, cpu = self._ended or (self._clock() - self._wall0, self._cpu() - self._cpu0)
        with self._lock:
            phases = dict(self.seconds)
            calls = dict(self.calls)
            details = dict(self.details)
            detail_calls = dict(self.detail_calls)
        span = self._span
        if span is not None:  # still holding: counted up to now
            phases[span[0]] += max(0.0, self._clock() - span[1] - span[2].inner)
        return {
            "wall_seconds": wall,
            "cpu_seconds": cpu,
            "phases": phases,
            "calls": calls,
            "other_seconds": max(0.0, wall - sum(phases.values())),
            "details": details,
            "detail_calls": detail_calls,
        }

    def describe(self) -> str:
        """One line: the wall and CPU time and each phase's seconds."""
        s = self.summary()
        parts = ", ".join(f"{k} {v:.2f}" for k, v in s["phases"].items())
        return (f"{s['wall_seconds']:.2f} s wall, {s['cpu_seconds']:.2f} s CPU: {parts}, "
                f"other {s['other_seconds']:.2f} s")  # fmt: skip
