"""The Kafka source's side of a rebalance: where newly assigned partitions start, what is saved
and committed before partitions are given up.

kafka-python 3 calls rebalance listeners on its IO loop thread, where blocking consumer calls
(commit, committed, seek...) are refused: each handler runs in a helper thread while the loop
goes on, and the loop is woken when it is done (:mod:`connectors.kafka_client`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from connectors import kafka_client
from connectors.errors import ConnectorError
from connectors.kafka_base import GroupSource
from connectors.kafka_common import fatal_errors

if TYPE_CHECKING:
    from kafka.consumer import KafkaConsumer
    from kafka.structs import TopicPartition

__all__ = ["RebalanceHandling"]

logger = logging.getLogger("connectors.kafka_source")  # the source's own log

_T = TypeVar("_T")
REQUEST_TIMEOUT_MS = 10_000  # one broker call made while handling an assignment
RETRY_PAUSE_S = 0.5  # pause after a failed poll or assignment call


class RebalanceHandling(GroupSource):
    """Assignment and revocation for :class:`~connectors.kafka_source.KafkaSource` (a mixin: the
    state it reads and updates is the source's, under the source's lock)."""

    def _listener(self, consumer: KafkaConsumer) -> Any:
        from kafka import AsyncConsumerRebalanceListener

        source = self

        class Listener(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                await source._in_helper_thread(consumer, source._revoked, revoked)

            async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                await source._in_helper_thread(
                    consumer, source._assigned_now, assigned, moot_when_closed=True
                )

        return Listener()

    async def _in_helper_thread(
        self,
        consumer: KafkaConsumer,
        handler: Callable[[KafkaConsumer, set[TopicPartition]], None],
        partitions: set[TopicPartition],
        *,
        moot_when_closed: bool = False,
    ) -> None:
        """Run ``handler`` in a new thread; the IO loop goes on meanwhile.

        kafka-python 3 calls listeners on its IO loop thread, where blocking
        consumer calls (commit, committed, seek...) are refused. The handler's
        failure is kept for the polling thread to raise, not given to
        kafka-python (whose close() would then stop half-way).
        ``moot_when_closed``: a failure once the source is closed is logged, not
        kept (an assignment the close cut short: no record of it was read, so it
        has nothing left to do; a stop during a rebalance is not an error).
        """
        from kafka.future import Future

        done = Future()

        def finish() -> None:
            done.success(None)

        def run() -> None:
            try:
                handler(consumer, partitions)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the polling thread
                if moot_when_closed and self._closed:
                    logger.info("rebalance callback for %s ended by the close: %r",
                                sorted(partitions), exc)  # fmt: skip
                else:
                    logger.error("rebalance callback for %s failed: %r", sorted(partitions), exc)
                    self._callback_error = exc
            finally:
                try:
                    kafka_client.call_soon_threadsafe(consumer, finish)
                except RuntimeError as exc:  # the client's IO loop closed: none awaits it
                    logger.log(logging.DEBUG if self._closed else logging.ERROR,
                               "rebalance callback for %s could not report back: %r",
                               sorted(partitions), exc)  # fmt: skip

        threading.Thread(target=run, name="kafka-source-rebalance", daemon=True).start()
        await done

    def _assigned_now(self, consumer: KafkaConsumer, partitions: set[TopicPartition]) -> None:
        self._joined = True  # the group has settled an assignment (maybe empty) for this member
        tps = sorted(partitions)
        keys = [(tp.topic, tp.partition) for tp in tps]
        if not tps:
            self._count_change(keys)
            logger.info("group %r assigned no partitions of %s", self.group_id, self.topics)
            return
        found = self._retrying(
            "reading committed offsets",
            lambda: {tp: consumer.committed(tp, timeout_ms=REQUEST_TIMEOUT_MS) for tp in tps},
        )
        committed = {key: found[tp] for tp, key in zip(tps, keys)}
        wanted, positions = self._starts(keys, committed)
        for tp, key in zip(tps, keys):
            if key in positions:
                consumer.seek(tp, positions[key])
        reset = [tp for tp, key in zip(tps, keys) if key not in positions]  # auto_offset_reset
        if reset:
            found = self._retrying(
                "finding start positions", lambda: {tp: _position(consumer, tp) for tp in reset}
            )
            positions.update({(tp.topic, tp.partition): o for tp, o in found.items()})
        ends = self._retrying(
            "reading end offsets", lambda: consumer.end_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS)
        )
        self._note_assigned(
            keys,
            positions,
            {(tp.topic, tp.partition): o for tp, o in ends.items()},
            committed,
            wanted,
        )

    def _revoked(self, consumer: KafkaConsumer, partitions: set[TopicPartition]) -> None:
        self._revoke([(tp.topic, tp.partition) for tp in partitions])

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        from kafka.errors import KafkaError

        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            try:
                return call()
            except KafkaError as exc:
                if isinstance(exc, fatal_errors()) or time.monotonic() > deadline:
                    raise ConnectorError(f"{what} for {self.topics!r} failed: {exc!r}") from exc
                logger.warning("%s for %s failed, retrying: %r", what, self.topics, exc)
                time.sleep(RETRY_PAUSE_S)


def _position(consumer: KafkaConsumer, tp: TopicPartition) -> int:
    from kafka.errors import KafkaTimeoutError

    offset = consumer.position(tp, timeout_ms=REQUEST_TIMEOUT_MS)
    if offset is None:
        raise KafkaTimeoutError(f"no position for {tp} within {REQUEST_TIMEOUT_MS} ms")
    return offset
