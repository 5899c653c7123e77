"""Where the Kafka source stands: lag and committed offsets for the metrics, whether the end
offsets seen at assignment are reached (``exit_at_end``), whether the group coordinator is lost."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from connectors import kafka_client
from connectors.kafka_base import GroupSource

if TYPE_CHECKING:
    from kafka.consumer import KafkaConsumer

__all__ = ["ProgressTracking"]

logger = logging.getLogger("connectors.kafka_source")  # the source's own log

LAG_REFRESH_S = 2.0  # how often cached end offsets are updated from fetch responses


class ProgressTracking(GroupSource):
    """Lag, end and coordinator tracking for :class:`~connectors.kafka_source.KafkaSource` (a
    mixin: the state it reads and updates is the source's, under the source's lock)."""

    def _at_end(self, consumer: KafkaConsumer, *, refresh: bool) -> bool:
        from kafka.errors import KafkaError
        from kafka.structs import MemberState, TopicPartition

        if consumer.group_metadata().state != MemberState.STABLE:
            return False
        pending = self._pending(sorted((tp.topic, tp.partition) for tp in consumer.assignment()))
        if pending is None:
            return False  # nothing assigned yet, or an assignment is being handled
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
        self._note_ends(
            {(tp.topic, tp.partition): consumer.highwater(tp) for tp in consumer.assignment()}
        )

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
