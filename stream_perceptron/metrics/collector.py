"""A custom collector: every model- and count-derived metric is computed when scraped.

The hot loop only updates plain Python counters (``RunStats``); this collector turns them and
the learner's weights into metric families at scrape time, under the engine's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from stream_perceptron import __version__
from stream_perceptron.join import DELAY_BUCKETS, DELAY_SECONDS_BUCKETS, JoinCounts
from stream_perceptron.metrics.model_view import ModelView, model_view, top_weights

__all__ = ["EngineCollector", "top_weights", "PREFIX"]

PREFIX = "stream_perceptron"


class EngineCollector(Collector):
    """Collects ``stream_perceptron_*`` metrics from a running engine.

    Parameters
    ----------
    engine
        The :class:`~stream_perceptron.engine.Engine` (its learner, stats, lock, recent examples
        and last checkpoint time are read at scrape time).
    max_weights
        How many weight series to expose (the largest in absolute value).
    kafka
        Optional callable returning Kafka consumer state: ``{"lag": {(topic, partition): n},
        "committed": {(topic, partition): offset}, "rebalances": n}``.

    """

    def __init__(
        self,
        engine: Any,
        max_weights: int = 50,
        kafka: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.engine = engine
        self.max_weights = max_weights
        self.kafka = kafka

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        with engine.lock:
            yield from self._counts(engine.stats)
            delayed = getattr(engine, "delayed", None)
            if delayed is not None and engine.stats.join is not None:
                store = delayed.waiting
                pending = (store.events, store.outcomes, store.max_pending)
                yield from self._join(engine.stats.join, *pending)
            view = model_view(engine.learner, engine.recent_window(), self.max_weights)
            checkpoint_time = engine.coordinator.last_saved_at
        yield from self._model(view)
        if checkpoint_time is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_checkpoint_last_success_timestamp_seconds",
                "Unix time of the last checkpoint written.",
                value=checkpoint_time,
            )
        info = GaugeMetricFamily(
            f"{PREFIX}_build_info", "stream-perceptron version.", labels=["version"]
        )
        info.add_metric([__version__], 1.0)
        yield info
        if self.kafka is not None:
            yield from self._kafka(self.kafka())

    def _counts(self, stats: Any) -> Iterator[Metric]:
        yield CounterMetricFamily(
            f"{PREFIX}_examples", "Labelled examples learned from.", value=float(stats.learned)
        )
        yield CounterMetricFamily(
            f"{PREFIX}_mistakes",
            "Prequential mistakes: the prediction made before learning differed from the label.",
            value=float(stats.mistakes),
        )
        yield CounterMetricFamily(
            f"{PREFIX}_predictions",
            "Predictions made, labelled records or not.",
            value=float(stats.learned + stats.unlabelled),
        )
        invalid = CounterMetricFamily(
            f"{PREFIX}_invalid_records", "Bad records, by reason.", labels=["reason"]
        )
        for reason, n in sorted(stats.invalid.items()):
            invalid.add_metric([reason], float(n))
        yield invalid
        drift = stats.drift
        if drift is not None:  # --drift-detector adwin
            yield CounterMetricFamily(
                f"{PREFIX}_drifts",
                "Drifts detected on the mistake stream (ADWIN: the error rate rose).",
                value=float(drift.drifts),
            )
            if drift.last_drift is not None:
                yield GaugeMetricFamily(
                    f"{PREFIX}_last_drift_position",
                    "Labelled examples learned when the last drift was detected.",
                    value=float(drift.last_drift),
                )
        if stats.accuracy is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_accuracy", "Prequential accuracy so far.", value=stats.accuracy
            )
        if stats.rolling_accuracy is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_rolling_accuracy",
                "Prequential accuracy over the last --rolling-window examples.",
                value=stats.rolling_accuracy,
            )

    def _join(
        self, counts: JoinCounts, events: int, outcomes: int, limit: int
    ) -> Iterator[Metric]:
        """--join-key: what waits, what the bounds dropped, the served predictions' mistakes,
        the label delay."""
        pending = GaugeMetricFamily(
            f"{PREFIX}_pending_examples",
            "Events waiting for their outcome, and outcomes for their event (--join-key).",
            labels=["kind"],
        )
        pending.add_metric(["event"], float(events))
        pending.add_metric(["outcome"], float(outcomes))
        yield pending
        yield GaugeMetricFamily(
            f"{PREFIX}_pending_examples_limit",
            "--max-pending: at most this many events and outcomes wait together; past it the "
            "oldest go (expired, unmatched).",
            value=float(limit),
        )
        for name, doc, value in (
            ("joined_examples", "Events learned with their outcome (--join-key).", counts.joined),
            ("served_mistakes", "Outcomes that differed from the prediction served when their "
             "event came.", counts.served_mistakes),
            ("expired_events", "Events dropped by --label-wait or --max-pending before their "
             "outcome came.", counts.expired),
            ("unmatched_outcomes", "Outcomes dropped by --label-wait or --max-pending before "
             "their event came.", counts.unmatched_outcome),
            ("duplicate_outcomes", "Outcomes of a key already joined or waiting (the first "
             "wins).", counts.duplicate_outcome),
            ("duplicate_events", "Events of a key already waiting (predicted, not kept).",
             counts.duplicate_event),
        ):  # fmt: skip
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=float(value))
        if counts.served_accuracy is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_served_accuracy",
                "Share of joined outcomes the prediction served for their event had right.",
                value=counts.served_accuracy,
            )
        yield HistogramMetricFamily(
            f"{PREFIX}_label_delay_records",
            "Records from an event to its outcome (0: the outcome came first).",
            buckets=_cumulative(DELAY_BUCKETS, counts.delay_buckets),
            sum_value=float(counts.delay_sum),
        )
        yield HistogramMetricFamily(
            f"{PREFIX}_label_delay_seconds",
            "Seconds from an event's timestamp to its outcome's, of the pairs whose records "
            "have timestamps (Kafka's messages; stdin lines have none).",
            buckets=_cumulative(DELAY_SECONDS_BUCKETS, counts.delay_ms_buckets),
            sum_value=counts.delay_ms_sum / 1000,
        )

    def _model(self, view: ModelView) -> Iterator[Metric]:
        weight = GaugeMetricFamily(
            f"{PREFIX}_weight",
            "The model's weights largest in absolute value (class is empty for binary models).",
            labels=["feature", "class"],
        )
        for c, feature, w in view.top:
            weight.add_metric([feature, c], w)
        yield weight
        yield GaugeMetricFamily(
            f"{PREFIX}_weights_nonzero", "Non-zero weights in the model.", value=float(view.nonzero)
        )
        bias = GaugeMetricFamily(f"{PREFIX}_bias", "Bias per class.", labels=["class"])
        for c, b in view.bias.items():
            bias.add_metric([c], b)
        yield bias
        norm = GaugeMetricFamily(
            f"{PREFIX}_weight_norm", "Euclidean norm of the weights per class.", labels=["class"]
        )
        for c, n in view.weight_norm.items():
            norm.add_metric([c], n)
        yield norm
        yield GaugeMetricFamily(
            f"{PREFIX}_input_norm_max", "R: the largest input norm seen.", value=view.radius
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_classes", "Number of classes.", value=float(view.classes)
        )
        if view.margin_min is not None and view.mistake_bound is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_margin_min",
                "Smallest geometric margin of the current hyperplane over the last window.",
                value=view.margin_min,
            )
            yield GaugeMetricFamily(
                f"{PREFIX}_mistake_bound",
                "(R / margin_min)^2 over the last window: the perceptron mistake bound, "
                "estimated.",
                value=view.mistake_bound,
            )
        if view.margin_quantiles is not None and view.wrong_side is not None:
            margins = GaugeMetricFamily(
                f"{PREFIX}_recent_margin",
                "Geometric margins of the current hyperplane over the last window, by "
                "percentile (0: the smallest; negative: on the wrong side).",
                labels=["percentile"],
            )
            for q, m in view.margin_quantiles:
                margins.add_metric([f"{100 * q:g}"], m)
            yield margins
            yield GaugeMetricFamily(
                f"{PREFIX}_recent_wrong_side_ratio",
                "Share of the last window on the wrong side of the current hyperplane (margin "
                "<= 0): above 0, the window is not separated and (R/margin)^2 bounds nothing.",
                value=view.wrong_side,
            )

    def _kafka(self, state: dict[str, Any]) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            f"{PREFIX}_kafka_consumer_lag",
            "Messages behind the end of each partition.",
            labels=["topic", "partition"],
        )
        for (topic, partition), n in sorted(state.get("lag", {}).items()):
            lag.add_metric([topic, str(partition)], n)
        yield lag
        committed = GaugeMetricFamily(
            f"{PREFIX}_kafka_committed_offset",
            "Last offset committed per partition.",
            labels=["topic", "partition"],
        )
        for (topic, partition), n in sorted(state.get("committed", {}).items()):
            committed.add_metric([topic, str(partition)], n)
        yield committed
        yield CounterMetricFamily(
            f"{PREFIX}_kafka_rebalances",
            "Partition assignment changes seen.",
            value=float(state.get("rebalances", 0)),
        )


def _cumulative(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """A histogram's buckets as Prometheus has them: each bound with the count up to it."""
    total, out = 0, []
    for bound, n in zip((*map(float, bounds), "+Inf"), counts):
        total += n
        out.append((str(bound), float(total)))
    return out
