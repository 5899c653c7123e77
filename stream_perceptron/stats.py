"""Running counts of an engine run: what the summary, the checkpoint and the metrics report."""

from __future__ import annotations

import resource
import sys
import time
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from stream_perceptron.drift import checked_state, reference_state
from stream_perceptron.errors import StateError
from stream_perceptron.join.counts import JoinCounts
from stream_perceptron.state import MAX_COUNT

if TYPE_CHECKING:
    from stream_perceptron.drift import DriftMonitor
    from stream_perceptron.engine.drift_reference import ReferenceWatch
    from stream_perceptron.learners import StreamClassifier

__all__ = ["RunStats"]


def _count(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise StateError(f"corrupt counters: {what} is {value!r}, not a count")
    return value


class RunStats:
    """Counters of records, examples, mistakes and bad records, plus a rolling accuracy window.

    The counters are cumulative across resumed runs (they travel in the checkpoint); the
    elapsed time and throughput are this process's own.

    Examples
    --------
    >>> stats = RunStats(rolling_window=2)
    >>> for mistake in (True, False, False):
    ...     stats.count_learned(mistake)
    >>> stats.count_invalid("invalid_json")
    >>> s = stats.summary()
    >>> s["records"], s["learned"], s["mistakes"], round(s["accuracy"], 3), s["invalid"]
    (4, 3, 1, 0.667, {'invalid_json': 1})
    >>> stats.rolling_accuracy
    1.0

    """

    def __init__(self, rolling_window: int = 1000) -> None:
        self.learned = 0
        self.unlabelled = 0
        self.mistakes = 0
        self.invalid: Counter[str] = Counter()
        self.records_this_run = 0
        self.recent_mistakes: deque[bool] = deque(maxlen=rolling_window)
        self.started = time.monotonic()
        #: The drift monitor fed every learned example's mistake (``None``: no detection).
        self.drift: DriftMonitor | None = None
        #: ``--drift-detector reference``: the model's copy whose mistakes ``drift`` watches
        #: (its state travels in the checkpoint with the counters).
        self.drift_reference: ReferenceWatch | None = None
        #: ``--join-key``: what the join of events and their later outcomes counted (``None``:
        #: labels come with their records).
        self.join: JoinCounts | None = None

    @property
    def records(self) -> int:
        """Every record read: learned, unlabelled, invalid, or kept waiting by the join."""
        waiting = 0 if self.join is None else self.join.records
        return self.learned + self.unlabelled + sum(self.invalid.values()) + waiting

    @property
    def accuracy(self) -> float | None:
        """Prequential accuracy: predictions made before learning that were right."""
        return (self.learned - self.mistakes) / self.learned if self.learned else None

    @property
    def rolling_accuracy(self) -> float | None:
        """Prequential accuracy over the last ``rolling_window`` labelled examples."""
        window = self.recent_mistakes
        return 1.0 - sum(window) / len(window) if window else None

    def count_learned(self, mistake: bool, watched: bool = True) -> None:
        """Count a learned example; its mistake goes to the drift monitor unless the monitor
        watches something else (``watched=False``: a reference copy's mistakes)."""
        self.learned += 1
        self.mistakes += mistake
        self.records_this_run += 1
        self.recent_mistakes.append(mistake)
        if watched and self.drift is not None:
            self.drift.observe_one(mistake)

    def count_many(self, mistakes: list[bool], unlabelled: int = 0, watched: bool = True) -> None:
        """Count a batch at once: one entry per learned example in ``mistakes`` (to the drift
        monitor unless ``watched`` is false, as :meth:`count_learned`)."""
        self.learned += len(mistakes)
        self.mistakes += sum(mistakes)
        self.unlabelled += unlabelled
        self.records_this_run += len(mistakes) + unlabelled
        self.recent_mistakes.extend(mistakes[-(self.recent_mistakes.maxlen or 0) :])
        if watched and self.drift is not None:
            self.drift.observe(mistakes)

    def count_unlabelled(self) -> None:
        self.unlabelled += 1
        self.records_this_run += 1

    def count_invalid(self, reason: str) -> None:
        self.invalid[reason] += 1
        self.records_this_run += 1

    def count_waiting(self) -> None:
        """A record the join keeps waiting (or refuses as a duplicate): counted by it alone."""
        assert self.join is not None
        self.join.records += 1
        self.records_this_run += 1

    @property
    def elapsed_seconds(self) -> float:
        return time.monotonic() - self.started

    def summary(self) -> dict[str, Any]:
        """The run's numbers as one JSON-serialisable dict."""
        elapsed = self.elapsed_seconds
        return {
            "records": self.records,
            "learned": self.learned,
            "unlabelled": self.unlabelled,
            "mistakes": self.mistakes,
            "accuracy": self.accuracy,
            "rolling_accuracy": self.rolling_accuracy,
            "invalid": dict(sorted(self.invalid.items())),
            "invalid_total": sum(self.invalid.values()),
            "records_this_run": self.records_this_run,
            "elapsed_seconds": round(elapsed, 6),
            "records_per_second": round(self.records_this_run / elapsed, 1) if elapsed else None,
            "peak_rss_bytes": peak_rss_bytes(),
            **({} if self.drift is None else {"drift": self._drift_summary()}),
            **({} if self.join is None else {"join": self.join.summary()}),
        }

    def _drift_summary(self) -> dict[str, Any]:
        assert self.drift is not None
        summary = self.drift.summary()
        if self.drift_reference is not None:
            summary["reference_taken_at"] = self.drift_reference.taken_at
        return summary

    def get_state(self) -> dict[str, Any]:
        """Cumulative counters for the checkpoint."""
        return {
            "learned": self.learned,
            "unlabelled": self.unlabelled,
            "mistakes": self.mistakes,
            "invalid": dict(self.invalid),
            "recent_mistakes": [int(m) for m in self.recent_mistakes],
            **({} if self.drift is None else {"drift": self.drift.get_state()}),
            **({} if self.drift_reference is None
               else {"drift_reference": self.drift_reference.get_state()}),
            **({} if self.join is None else {"join": self.join.get_state()}),
        }

    def load_state(self, state: Any, model: StreamClassifier | None = None) -> None:
        """Continue from :meth:`get_state`'s counters; :class:`StateError` when ``state`` is not
        such counters (a wrong type, a negative count, more mistakes than examples) or its
        drift states do not load (checked even without a detector to take them: the reference
        copy against ``model``, the checkpoint's model, when given)."""
        if not isinstance(state, dict):
            raise StateError(f"corrupt counters: {state!r}")
        learned, unlabelled, mistakes = (
            _count(state.get(name), name) for name in ("learned", "unlabelled", "mistakes")
        )
        if mistakes > learned:
            raise StateError(f"corrupt counters: {mistakes} mistakes in {learned} examples")
        invalid = state.get("invalid")
        recent = state.get("recent_mistakes")
        if not isinstance(invalid, dict) or not isinstance(recent, list):
            raise StateError("corrupt counters: invalid or recent_mistakes of the wrong type")
        if any(m not in (0, 1) or type(m) not in (int, bool) for m in recent):
            raise StateError("corrupt counters: recent_mistakes holds something not 0 or 1")
        reasons = Counter({str(k): _count(v, f"invalid[{k!r}]") for k, v in invalid.items()})
        saved_join = state.get("join")
        join = None if saved_join is None else JoinCounts.from_state(saved_join)
        if join is not None:  # its records stay counted, with or without --join-key now
            self.join = join
        self.learned, self.unlabelled, self.mistakes = learned, unlabelled, mistakes
        self.invalid = reasons
        self.recent_mistakes.extend(bool(m) for m in recent)
        drift, saved_reference = state.get("drift"), state.get("drift_reference")
        if self.drift is not None and drift is not None:
            self.drift.load_state(drift, learned)
        elif self.drift is not None:  # saved without a detector: count on from here
            self.drift.start_at(learned)
        elif drift is not None:  # no detector here (inspect): the state is checked all the same
            checked_state(drift, learned)
        reference = self.drift_reference
        if reference is not None and saved_reference is not None:
            reference.load_state(saved_reference, learned)
        elif reference is not None:  # saved without the reference detector
            reference.start_at(learned)
        elif saved_reference is not None and model is not None:
            reference_state(saved_reference, model, learned)

    def format_human(self) -> str:
        """A short multi-line summary for people."""
        s = self.summary()
        acc = "n/a" if s["accuracy"] is None else f"{s['accuracy']:.4f}"
        lines = [
            f"records          {s['records']}",
            f"learned          {s['learned']}",
            f"predicted only   {s['unlabelled']}",
            f"mistakes         {s['mistakes']}",
            f"accuracy         {acc} (prequential)",
            f"invalid          {s['invalid_total']}",
        ]
        width = max([15, *map(len, s["invalid"])])
        lines += [f"  {reason:<{width}} {n}" for reason, n in s["invalid"].items()]
        if self.drift is not None:
            d = self.drift
            where = "" if d.last_drift is None else f", last at example {d.last_drift}"
            how = "ADWIN"
            if self.drift_reference is not None:
                taken = self.drift_reference.taken_at
                how += " on a frozen copy of the model, " + (
                    f"taken at example {taken}" if taken is not None else "not taken yet"
                )
                where = where.replace(",", ";", 1)
            lines.append(f"drifts           {d.drifts} ({how}{where})")
        if self.join is not None:
            j = self.join
            served = "n/a" if j.served_accuracy is None else f"{j.served_accuracy:.4f}"
            lines += [
                f"joined           {j.joined} of {j.events} events, {j.outcomes} outcomes "
                f"(served accuracy {served})",
                f"  expired {j.expired}, unmatched outcomes {j.unmatched_outcome}, duplicate "
                f"outcomes {j.duplicate_outcome}, duplicate events {j.duplicate_event}",
            ]
        rate = s["records_per_second"] or 0.0
        lines.append(f"elapsed          {s['elapsed_seconds']:.3f} s ({rate:,.0f} records/s)")
        return "\n".join(lines)


def peak_rss_bytes() -> int:
    """This process's peak resident memory, in bytes.

    Linux's ``VmHWM`` starts afresh with each program; ``ru_maxrss`` can carry the peak of the
    process that forked us, so it is only the fallback.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024
