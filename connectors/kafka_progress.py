"""Where the Kafka source stands: lag and committed offsets for the metrics, whether the end
offsets seen at assignment are reached (``exit_at_end``), whether the group coordinator is lost."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from connectors import kafka_client
from connectors.kafka_common import SourceState, TopicPartitionKey

if TYPE_CHECKING:
    from kafka.consumer import KafkaConsumer

__all__ = ["ProgressTracking"]

logger = logging.getLogger("connectors.kafka_source")  # the source's own log

LAG_REFRESH_S = 2.0  # how often cached end offsets are updated from fetch responses


class ProgressTracking(SourceState):
    """Lag, end and coordinator tracking for :class:`~connectors.kafka_source.KafkaSource` (a
    mixin: the state it reads and updates is the source's, under the source's lock)."""

    def lag(self) -> dict[TopicPartitionKey, int]:
        """Messages not yet read, per assigned partition (end offset - position).

        Returns
        -------
        dict
            ``{(topic, partition): lag}``; uses cached end offsets, no network call.
        """
        with self._lock:
            return {
                tp: max(0, self._ends[tp] - self._positions[tp])
                for tp in self._assigned
                if tp in self._ends and tp in self._positions
            }

    def committed_offsets(self) -> dict[TopicPartitionKey, int]:
        """Offsets last committed successfully by this source, per partition."""
        with self._lock:
            return dict(self._committed)

    def _at_end(self, consumer: KafkaConsumer, *, refresh: bool) -> bool:
        from kafka.errors import KafkaError
        from kafka.structs import MemberState, TopicPartition

        if consumer.group_metadata().state != MemberState.STABLE:
            return False
        current = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
        with self._lock:
            if not current or current != self._assigned:
                return False  # nothing assigned yet, or an assignment is being handled
            pending = [tp for tp in current if self._positions[tp] < self._stop_at[tp]]
        if pending and refresh:  # positions can move past non-message records
            try:
                moved = {tp: consumer.position(TopicPartition(*tp), timeout_ms=0) for tp in pending}
            except KafkaError as exc:
                logger.debug("reading positions failed: %r", exc)
                return False
            with self._lock:
                for tp, offset in moved.items():
                    if offset is not None and tp in self._positions:
                        self._positions[tp] = max(offset, self._positions[tp])
                pending = [tp for tp in pending if self._positions[tp] < self._stop_at[tp]]
        return not pending

    def _refresh_ends(self, consumer: KafkaConsumer) -> None:
        now = time.monotonic()
        if now - self._ends_refreshed < LAG_REFRESH_S:
            return
        self._ends_refreshed = now
        highwaters = {
            (tp.topic, tp.partition): consumer.highwater(tp) for tp in consumer.assignment()
        }
        with self._lock:
            for tp in self._assigned:
                if highwaters.get(tp) is not None:
                    self._ends[tp] = highwaters[tp]

    def _watch_coordinator(self, consumer: KafkaConsumer) -> None:
        """Log when the group coordinator is lost and found again (kafka-python reconnects)."""
        if not self._had_partitions:
            return
        lost = kafka_client.coordinator_unknown(consumer)  # no network call
        if lost and self._lost_since is None:
            self._lost_since = time.monotonic()
            logger.warning(
                "group %r lost its coordinator (broker unreachable?); reconnecting", self.group_id
            )
        elif not lost and self._lost_since is not None:
            logger.info(
                "group %r reached its coordinator again after %.1f s",
                self.group_id,
                time.monotonic() - self._lost_since,
            )
            self._lost_since = None
