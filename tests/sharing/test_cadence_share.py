"""A worker's share of a mixing period from its first commit: ``mix_every`` times its share of
the input's partitions, the partitions its source listed at the start counted with those the
model topic names (an empty one names none)."""

from __future__ import annotations

from collections.abc import Callable

from test_shared_coordinator import TOPIC, Cluster, _worker

from connectors.kafka.transactions import PartitionCounter


class _Listing:
    """A source that lists its topics' partitions when asked (as a group source does before
    its first poll)."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[dict[str, int]], None]] = []

    def tell_partition_counts(self, listener: Callable[[dict[str, int]], None]) -> None:
        self.listeners.append(listener)


def test_a_worker_with_half_the_partitions_commits_every_half_mixing_period_from_the_start():
    _, coordinator = _worker(Cluster(), "w1", mix_every=1000)
    coordinator.every = None  # the share alone (the harness also commits every 50)
    source = _Listing()
    assert isinstance(source, PartitionCounter)
    coordinator.bind(source)  # type: ignore[arg-type]
    coordinator.assigned([(TOPIC, p) for p in (0, 1, 2)])
    # the model topic is empty: its own 3 partitions are all the worker knows of
    assert coordinator.batch_limit == 1000
    for listener in source.listeners:
        listener({TOPIC: 6})
    assert coordinator.batch_limit == 500
    assert coordinator.due(499) is False and coordinator.due(500) is True
