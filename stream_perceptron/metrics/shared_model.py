"""Shared-model mode's metrics, computed when scraped from the worker's coordinator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from stream_perceptron.metrics.collector import PREFIX

__all__ = ["SharedModelCollector"]


class SharedModelCollector(Collector):
    """``stream_perceptron_model_version``, mixes, divergence, partitions and restores of one
    worker, and where its time goes (``stream_perceptron_shared_phase_seconds_total`` by
    ``phase``, beside its wall and CPU seconds).

    Parameters
    ----------
    coordinator
        The worker's :class:`~stream_perceptron.sharing.coordinator.SharedModelCoordinator`.
    lock
        The engine's lock (the coordinator's numbers change under it).

    Examples
    --------
    >>> import threading
    >>> from types import SimpleNamespace
    >>> from prometheus_client import CollectorRegistry
    >>> from stream_perceptron.sharing.timeline import Timeline
    >>> c = SimpleNamespace(version=4, mixes=3, last_mix_at=None, divergence=0.5, owned={1, 2},
    ...                     restores=2, restore_seconds=0.25, commits=9, commit_seconds=0.5,
    ...                     mix_seconds=0.1, timeline=Timeline(),
    ...                     view=SimpleNamespace(rejected={"not_json": 1}))
    >>> registry = CollectorRegistry()
    >>> registry.register(SharedModelCollector(c, threading.Lock()))
    >>> registry.get_sample_value("stream_perceptron_model_version")
    4.0
    >>> registry.get_sample_value("stream_perceptron_partitions_owned")
    2.0
    >>> registry.get_sample_value("stream_perceptron_model_records_rejected_total",
    ...                           {"reason": "not_json"})
    1.0
    >>> c.timeline.add("learn", 2.5)
    >>> registry.get_sample_value("stream_perceptron_shared_phase_seconds_total",
    ...                           {"phase": "learn"})
    2.5

    """

    def __init__(self, coordinator: Any, lock: Any) -> None:
        self.coordinator = coordinator
        self.lock = lock

    def collect(self) -> Iterator[Metric]:
        c = self.coordinator
        with self.lock:
            version, mixes, last_mix, div = c.version, c.mixes, c.last_mix_at, c.divergence
            owned, restores, restore_s = len(c.owned), c.restores, c.restore_seconds
            commits, rejected = c.commits, dict(c.view.rejected)
            commit_s, mix_s = c.commit_seconds, c.mix_seconds
        timeline = c.timeline.summary()  # under its own lock
        yield GaugeMetricFamily(
            f"{PREFIX}_model_version",
            "Version of the mixture this worker's model is based on.",
            value=float(version),
        )
        yield CounterMetricFamily(
            f"{PREFIX}_mixes",
            "Mixtures this worker's model moved onto (made by the leader, or by itself as leader).",
            value=float(mixes),
        )
        if last_mix is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_seconds_since_last_mix",
                "Seconds since this worker's model last moved onto a mixture.",
                value=max(0.0, time.time() - last_mix),
            )
        yield GaugeMetricFamily(
            f"{PREFIX}_mix_divergence",
            "Norm of the change of this worker's model when it last moved onto a mixture.",
            value=div,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_partitions_owned",
            "Input partitions this worker owns.",
            value=float(owned),
        )
        yield CounterMetricFamily(
            f"{PREFIX}_state_restores",
            "Partition states restored from the model topic on assignment.",
            value=float(restores),
        )
        yield CounterMetricFamily(
            f"{PREFIX}_state_restore_seconds",
            "Time spent restoring partition states.",
            value=restore_s,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_transactions", "Transactions committed.", value=float(commits)
        )
        yield CounterMetricFamily(
            f"{PREFIX}_transaction_seconds",
            "Time spent committing transactions.",
            value=commit_s,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_mix_seconds",
            "Time spent reading the model topic and mixing.",
            value=mix_s,
        )
        refused = CounterMetricFamily(
            f"{PREFIX}_model_records_rejected",
            "Model-topic records refused (never folded into the model), by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(rejected.items()):
            refused.add_metric([reason], float(count))
        yield refused
        yield from _timeline(timeline)


def _timeline(timeline: dict[str, Any]) -> Iterator[Metric]:
    """Where the worker's time goes (see :mod:`stream_perceptron.sharing.timeline`)."""
    seconds = CounterMetricFamily(
        f"{PREFIX}_shared_phase_seconds",
        "Seconds of this shared-model worker's wall time by phase (exclusive; 'other': "
        "the time no phase holds, as polling the input).",
        labels=["phase"],
    )
    calls = CounterMetricFamily(
        f"{PREFIX}_shared_phase_calls",
        "Times each phase of this shared-model worker was entered.",
        labels=["phase"],
    )
    for phase, value in timeline["phases"].items():
        seconds.add_metric([phase], value)
        calls.add_metric([phase], float(timeline["calls"][phase]))
    seconds.add_metric(["other"], timeline["other_seconds"])
    yield seconds
    yield calls
    yield CounterMetricFamily(
        f"{PREFIX}_shared_wall_seconds",
        "Wall seconds since this shared-model worker started.",
        value=timeline["wall_seconds"],
    )
    yield CounterMetricFamily(
        f"{PREFIX}_shared_cpu_seconds",
        "CPU seconds (user and system, every thread) of this worker's process since it "
        "started.",
        value=timeline["cpu_seconds"],
    )
