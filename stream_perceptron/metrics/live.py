"""The live page's data: ``GET /api/state``, a JSON document computed when it is asked for (like
the Prometheus collector, and from the same :func:`~.model_view.model_view`), plus the learning
curve, sampled between batches (never per record).

The document (``schema_version`` 1) is stable for scripts:

``run``
    ``source``, ``format``, ``model``, ``hyperparameters``, ``started_at`` (Unix seconds),
    ``ended`` (the stream is over; the page stays up until the process stops).
``counts``
    ``records``, ``learned``, ``unlabelled``, ``mistakes``, ``invalid`` (by reason),
    ``accuracy``, ``rolling_accuracy``, ``records_per_second``, ``elapsed_seconds``.
``curve``
    ``[[examples, mistakes], ...]``: at most 500 points from the start of the run, thinned
    evenly as it grows.
``drifts``
    null without ``--drift-detector``, else the examples at which the last 100 drifts were
    seen (the page marks them on the curve).
``model``
    ``weights`` (``[class, feature, weight]``, largest ``|weight|`` first), ``nonzero``,
    ``bias`` (per class, ``""`` for a binary model), ``radius`` (R), ``classes``,
    ``margin_min`` and ``mistake_bound`` (``(R/margin)^2`` over the recent window, or null:
    null whenever an example of the window is on the wrong side), and the window's margins:
    ``margin_quantiles`` (``[[q, margin], ...]``), ``wrong_side`` (the share with margin <= 0)
    and ``margin_histogram`` (``{"edges": [...], "counts": [...]}``), null without a window.
``checkpoint``
    ``path`` and ``age_seconds`` (null before the first).
``join``
    null without ``--join-key``, else the join (labels that come later): ``events_waiting``,
    ``outcomes_waiting``, ``max_pending``, ``label_wait`` (in ``label_wait_unit``: records or
    ms), ``events``, ``outcomes``,
    ``joined``, ``served_mistakes``, ``served_accuracy`` (null before the first pair),
    ``expired``, ``unmatched_outcomes``, ``duplicate_outcomes``, ``duplicate_events`` (the
    counters of ``/metrics``), and ``delay``: the label delay in records, ``buckets``
    (``[[upper bound, pairs], ...]``, the last bound ``"+Inf"``), ``count``, ``sum``, ``mean``
    and ``median``, ``p90`` (estimated from the buckets as Prometheus' ``histogram_quantile``
    does, so the page and a Grafana panel agree; null before the first pair); ``delay_seconds``
    the same in seconds, of the pairs whose records have timestamps (Kafka's messages).

However often it is requested, the document is computed at most every 0.5 s (a request within
that time gets the last one), so polling it cannot slow learning.
``kafka``
    null, or ``lag`` (``[topic, partition, lag]``) and ``rebalances``.
``shared_model``
    null outside shared-model mode (``--model-topic``), else what this worker knows of the
    group: ``worker`` (its id), ``version`` (of the mixture its model is based on), ``mixes``,
    ``last_mix_age_seconds``, ``divergence``, ``versions`` (``[seconds since start, version]``
    at each change, at most 500), ``owned`` (``[topic, partition]`` this worker owns),
    ``workers`` (``[{"worker", "partitions": [[topic, partition, next_offset, lag]]}]``: each
    partition under the worker that last committed it, by the model topic's partition
    records, this worker's own partitions under it; ``lag`` is known for its own only, else
    null), ``group_size`` and ``rejected`` (model-topic records refused, by reason).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from stream_perceptron.join import DELAY_BUCKETS, DELAY_SECONDS_BUCKETS, JoinCounts
from stream_perceptron.metrics.model_view import model_view

__all__ = ["LiveState", "PAGE", "bucket_quantile"]

SCHEMA_VERSION = 1
CURVE_POINTS = 500
MIN_INTERVAL_S = 0.5  # /api/state is computed at most this often (the page polls every 1 s)

#: The page itself: one self-contained HTML file (inline CSS and JavaScript, SVG charts).
PAGE = resources.files("stream_perceptron.metrics").joinpath("live_page.html")


class LiveState:
    """Builds ``/api/state`` for one engine.

    Parameters
    ----------
    engine
        The engine (its stats, learner, lock, recent window and coordinator are read).
    describe
        What the run watches: ``source``, ``format`` (shown as they are).
    max_weights
        Weights listed.
    kafka
        Optional callable giving the Kafka source's state (as for the collector).
    """

    def __init__(
        self,
        engine: Any,
        describe: dict[str, Any] | None = None,
        max_weights: int = 20,
        kafka: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.engine = engine
        self.describe = dict(describe or {})
        self.max_weights = max_weights
        self.kafka = kafka
        self.started_at = time.time()
        self.ended = False
        self._curve: list[tuple[int, int]] = [(0, 0)]
        self._stride = 1  # keep every stride-th sample; doubles when the curve is full
        self._seen = 0
        self._curve_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cached: tuple[float, bool, bytes] | None = None
        self._versions: list[tuple[float, int]] = []  # shared-model mode: (seconds, version)

    def observe_batch(self, _seconds: float) -> None:
        """Between batches: one point of the learning curve (examples, mistakes)."""
        stats = self.engine.stats
        point = (stats.learned, stats.mistakes)
        coordinator = self.engine.coordinator
        with self._curve_lock:
            version = int(coordinator.version) if _is_shared(coordinator) else None
            if version is not None and (not self._versions or self._versions[-1][1] != version):
                self._versions.append((round(time.time() - self.started_at, 3), version))
                if len(self._versions) > CURVE_POINTS:
                    self._versions = self._versions[::2]
            if point[0] == self._curve[-1][0]:
                return
            self._seen += 1
            if self._seen % self._stride:
                return
            self._curve.append(point)
            if len(self._curve) > CURVE_POINTS:
                self._curve = self._curve[::2]
                self._stride *= 2

    def state(self) -> dict[str, Any]:
        """The document, computed now."""
        engine = self.engine
        with engine.lock:
            stats = engine.stats
            learner = engine.learner
            view = model_view(learner, engine.recent_window(), self.max_weights)
            summary = stats.summary()
            coordinator = engine.coordinator
            saved_at = coordinator.last_saved_at
            params = learner._get_params()
            curve = [*self._curve, (stats.learned, stats.mistakes)]
            drifts = None if stats.drift is None else list(stats.drift.positions)
            shared = _shared(coordinator) if _is_shared(coordinator) else None
            delayed = getattr(engine, "delayed", None)
            join = None if delayed is None or stats.join is None else _join(
                stats.join, delayed.waiting
            )
        kafka = None
        lag: dict[tuple[str, int], int] = {}
        if self.kafka is not None:
            got = self.kafka()
            lag = dict(got.get("lag", {}))
            kafka = {
                "lag": [[t, p, n] for (t, p), n in sorted(lag.items())],
                "rebalances": got.get("rebalances", 0),
            }
        if shared is not None:
            with self._curve_lock:
                versions = [[t, v] for t, v in self._versions]
            if not versions or versions[-1][1] != shared["version"]:  # moved since a batch
                versions.append([round(time.time() - self.started_at, 3), shared["version"]])
            shared["versions"] = versions
            for worker in shared["workers"]:
                for row in worker["partitions"]:
                    row[3] = lag.get((row[0], row[1]))
        return {
            "schema_version": SCHEMA_VERSION,
            "run": {
                **self.describe,
                "model": type(learner).__name__,
                "hyperparameters": params,
                "started_at": self.started_at,
                "ended": self.ended,
            },
            "counts": {
                key: summary[key]
                for key in (
                    "records", "learned", "unlabelled", "mistakes", "invalid", "accuracy",
                    "rolling_accuracy", "records_per_second", "elapsed_seconds",
                )
            },  # fmt: skip
            "curve": [list(p) for p in _thin(curve)],
            "drifts": drifts,
            "model": {
                "weights": [[c, f, w] for c, f, w in view.top],
                "nonzero": view.nonzero,
                "bias": view.bias,
                "radius": view.radius,
                "classes": view.classes,
                "margin_min": view.margin_min,
                "mistake_bound": view.mistake_bound,
                "margin_quantiles": None if view.margin_quantiles is None
                else [list(p) for p in view.margin_quantiles],
                "wrong_side": view.wrong_side,
                "margin_histogram": None if view.margin_histogram is None
                else {"edges": view.margin_histogram[0], "counts": view.margin_histogram[1]},
            },
            "checkpoint": {
                "path": coordinator.path,
                "age_seconds": None if saved_at is None else max(0.0, time.time() - saved_at),
            },
            "kafka": kafka,
            "shared_model": shared,
            "join": join,
        }

    def state_json(self) -> bytes:
        """:meth:`state` as JSON, computed at most every ``MIN_INTERVAL_S``: however often it
        is asked for, the learning loop gives up its lock for it at most that often."""
        with self._cache_lock:
            now = time.monotonic()
            cached = self._cached
            if cached is not None and now - cached[0] < MIN_INTERVAL_S and cached[1] == self.ended:
                return cached[2]
            body = json.dumps(self.state(), allow_nan=False, default=str).encode()
            self._cached = (now, self.ended, body)
            return body


def _is_shared(coordinator: Any) -> bool:
    """Whether ``coordinator`` is a shared-model one (its view of the model topic)."""
    return hasattr(coordinator, "view") and hasattr(coordinator, "mixes")


def _shared(c: Any) -> dict[str, Any]:
    """The group as a shared-model coordinator ``c`` knows it (called under the engine's
    lock, which the coordinator's state changes under)."""
    owners: dict[str, list[list[Any]]] = {}
    owned = sorted(c.owned, key=lambda k: (k[0], k[1] or 0))
    for (topic, partition), record in c.view.partitions.items():
        worker = c.worker if (topic, partition) in c.owned else record.worker or "?"
        owners.setdefault(worker, []).append([topic, partition, record.next_offset, None])
    for topic, partition in owned:  # owned, no partition record yet: next offset unknown
        if (topic, partition) not in c.view.partitions:
            owners.setdefault(c.worker, []).append([topic, partition, None, None])
    return {
        "worker": c.worker,
        "version": c.version,
        "mixes": c.mixes,
        "last_mix_age_seconds": (
            None if c.last_mix_at is None else max(0.0, time.time() - c.last_mix_at)
        ),
        "divergence": c.divergence,
        "owned": [[t, p] for t, p in owned],
        "workers": [
            {"worker": w, "partitions": sorted(rows, key=lambda r: (r[0], r[1] or 0))}
            for w, rows in sorted(owners.items())
        ],
        "group_size": c.view.group_size(),
        "rejected": dict(c.view.rejected),
    }


def _join(counts: JoinCounts, pending: Any) -> dict[str, Any]:
    """``--join-key``'s part: what waits (``pending``: the engine's store), what the join did,
    the label delay (called under the engine's lock)."""
    buckets = counts.delay_buckets
    return {
        "events_waiting": pending.events,
        "outcomes_waiting": pending.outcomes,
        "max_pending": pending.max_pending,
        "label_wait": pending.label_wait,
        "label_wait_unit": "ms" if pending.by_time else "records",
        "events": counts.events,
        "outcomes": counts.outcomes,
        "joined": counts.joined,
        "served_mistakes": counts.served_mistakes,
        "served_accuracy": counts.served_accuracy,
        "expired": counts.expired,
        "unmatched_outcomes": counts.unmatched_outcome,
        "duplicate_outcomes": counts.duplicate_outcome,
        "duplicate_events": counts.duplicate_event,
        "delay": _delay(DELAY_BUCKETS, buckets, counts.delay_sum),
        "delay_seconds": _delay(DELAY_SECONDS_BUCKETS, counts.delay_ms_buckets,
                                counts.delay_ms_sum / 1000),  # fmt: skip
    }


def _delay(bounds: tuple[float, ...], buckets: list[int], total: float) -> dict[str, Any]:
    """A label delay histogram for the page: its buckets, count, sum, mean and quantiles."""
    n = sum(buckets)
    return {
        "buckets": [[b, c] for b, c in zip((*bounds, "+Inf"), buckets)],
        "count": n,
        "sum": total,
        "mean": total / n if n else None,
        "median": bucket_quantile(0.5, buckets, bounds),
        "p90": bucket_quantile(0.9, buckets, bounds),
    }


def bucket_quantile(
    q: float, counts: list[int], bounds: tuple[float, ...] = DELAY_BUCKETS
) -> float | None:
    """The ``q`` quantile of the label delay from its bucket ``counts`` (one per bound of
    ``bounds``, :data:`~stream_perceptron.join.DELAY_BUCKETS` unless said, then +Inf),
    estimated as Prometheus' ``histogram_quantile`` does: linear within the bucket that holds
    the rank, the upper bound of a first bucket whose bound is 0, the largest finite bound past
    them all; None when empty.

    Examples
    --------
    >>> n = [0] * 13
    >>> n[0], n[2], n[3] = 2, 4, 4  # 2 delays of 0, 4 in (1, 10], 4 in (10, 50]
    >>> [bucket_quantile(q, n) for q in (0.1, 0.5, 0.9)]
    [0.0, 7.75, 40.0]
    >>> n[-1] = 90  # most past the last bound: the last bound
    >>> bucket_quantile(0.5, n), bucket_quantile(0.5, [0] * 13)
    (1000000.0, None)

    """
    total = sum(counts)
    if not total:
        return None
    rank = q * total
    below = 0
    for i, n in enumerate(counts):
        if below + n >= rank and i < len(bounds):
            upper = float(bounds[i])
            if i == 0 and upper <= 0:
                return upper
            lower = 0.0 if i == 0 else float(bounds[i - 1])
            return lower + (upper - lower) * (rank - below) / n
        below += n
    return float(bounds[-1])


def _thin(curve: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Drop a repeated last point (no example since the last sample)."""
    if len(curve) > 1 and curve[-1] == curve[-2]:
        return curve[:-1]
    return curve
