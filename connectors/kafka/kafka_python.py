"""The kafka-python adapter's consumers (kafka-python 3.x, imported lazily): the group source
and the model-log reader (the producers are in :mod:`connectors.kafka.kafka_python_producer`,
the library's private internals both rely on in :mod:`connectors.kafka.kafka_python_internals`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka.common import (
    HEARTBEAT_MS,
    TopicPartitionKey,
    make_client,
    merge_client_options,
)
from connectors.kafka.group_source import GroupSource
from connectors.kafka.kafka_python_internals import (
    call_soon_threadsafe,
    coordinator_unknown,
    keep_join_going,
    require_internals,
)
from connectors.kafka.kafka_python_logs import quiet_close_race
from connectors.kafka.model_log import TOPIC_CONFIG, LogRecord, ModelLogBase
from connectors.message_block import MessageBlock

__all__ = ["KafkaModelLog", "KafkaSource", "fatal_errors", "kafka_errors"]

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_MS = 10_000  # one broker call made while handling an assignment
_DESERIALIZERS = ("key_deserializer", "value_deserializer")  # values are bytes, as sent
_value, _key, _offset = attrgetter("value"), attrgetter("key"), attrgetter("offset")
_timestamp = attrgetter("timestamp")


def fatal_errors() -> tuple[type[Exception], ...]:
    """kafka-python errors that retrying cannot fix (configuration, rights)."""
    import kafka.errors as e

    return (
        e.AuthorizationError, e.SaslAuthenticationFailedError, e.UnsupportedSaslMechanismError,
        e.IllegalSaslStateError, e.KafkaConfigurationError, e.IllegalStateError,
        e.UnsupportedVersionError, e.InvalidTopicError, e.InvalidGroupIdError,
        e.InvalidSessionTimeoutError, e.FencedInstanceIdError,
    )  # fmt: skip


def kafka_errors() -> tuple[type[BaseException], ...]:
    """kafka-python's errors (its base class)."""
    from kafka.errors import KafkaError

    return (KafkaError,)


def _tp(key: TopicPartitionKey) -> Any:
    from kafka.structs import TopicPartition

    return TopicPartition(*key)


def offsets_of(offsets: dict[TopicPartitionKey, int]) -> dict[Any, Any]:
    """``offsets`` as kafka-python's ``{TopicPartition: OffsetAndMetadata}``."""
    from kafka.structs import OffsetAndMetadata

    return {_tp(key): OffsetAndMetadata(o, "", -1) for key, o in offsets.items()}


# -- the group source --------------------------------------------------------------------------
class KafkaSource(GroupSource):
    """A :class:`~connectors.kafka.group_source.GroupSource` on kafka-python;
    ``client_options`` are ``KafkaConsumer`` settings (``security_protocol``,
    ``sasl_mechanism``, ``ssl_cafile``, ``session_timeout_ms``...).

    ``on_assign``, ``on_revoke`` and the broker calls of an assignment run in a short-lived
    helper thread while the iterating thread waits inside kafka-python (whose own network
    thread keeps the heartbeats going, so a slow callback does not cost the membership).

    Examples
    --------
    No connection is made before :meth:`batches` is iterated:

    >>> source = KafkaSource("127.0.0.1:9", ["events"], "learners")
    >>> source.assignment, source.lag(), source.committed_offsets(), source.rebalances
    ([], {}, {}, 0)
    >>> source.close()
    """

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        return merge_client_options(
            {  # a mistyped --topic is not created by reading it
                "auto_offset_reset": "earliest",
                "reconnect_backoff_max_ms": 5000,
                "allow_auto_create_topics": False,
                # a rebalance is learnt from a heartbeat's answer (see HEARTBEAT_MS)
                "heartbeat_interval_ms": HEARTBEAT_MS,
            },
            client_options,
            # read_committed, as librdkafka's default: no record of an aborted transaction is
            # learned, and the group's committed offsets are asked for stable ones only (KIP-447):
            # a new owner waits for the transaction of a member the group dropped while its
            # offsets were in it, instead of reading from the last commit before it (read
            # uncommitted, a worker stopped inside its commit had its records learned twice)
            {"bootstrap_servers": bootstrap_servers, "group_id": self.group_id,
             "enable_auto_commit": False, "max_poll_records": self._max_poll_records,
             "isolation_level": "read_committed"},
            _DESERIALIZERS,
        )  # fmt: skip

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return kafka_errors()

    def _fatal(self, exc: BaseException) -> bool:
        return isinstance(exc, fatal_errors())

    def _open(self) -> Any:
        from kafka.consumer import KafkaConsumer

        quiet_close_race()
        config = self._config
        consumer = make_client(lambda: KafkaConsumer(**config), "consumer",
                               config["bootstrap_servers"], kafka_errors(), config)  # fmt: skip
        try:
            require_internals(consumer)
        except ConnectorError:
            consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
            raise
        consumer.subscribe(topics=self.topics, listener=self._listener(consumer))
        self._consumer = consumer
        logger.info("subscribed to %s as group %r", self.topics, self.group_id)
        return consumer

    def _topic_partitions(self, consumer: Any) -> dict[str, int]:
        try:
            return {t: len(consumer.partitions_for_topic(t)) for t in consumer.topics()}
        except kafka_errors() as exc:
            raise ConnectorError(
                f"cannot list the topics of {self._config['bootstrap_servers']}: {exc!r}"
            ) from exc

    def _subscribed_partition_counts(self, consumer: Any) -> dict[str, int]:
        # the metadata the consumer keeps (it lists the subscribed topics once they are
        # assigned); never partitions_for_topic(), which fetches every topic's on a miss
        cluster = getattr(consumer, "_cluster", None)
        counts = {}
        for topic in self.topics:
            partitions = cluster.partitions_for_topic(topic) if cluster is not None else None
            if partitions:
                counts[topic] = len(partitions)
        return counts

    def _consume(self, consumer: Any) -> list[MessageBlock]:
        polled = consumer.poll(timeout_ms=self._poll_timeout_ms, max_records=self._poll_count)
        keep_join_going(consumer)
        return [
            MessageBlock(tp.topic, tp.partition, list(map(_value, messages)),
                         list(map(_offset, messages)), list(map(_key, messages)),
                         list(map(_timestamp, messages)) if self._timestamps else None)
            for tp, messages in polled.items() if messages
        ]  # fmt: skip

    def _range_assignor(self, config: dict[str, Any]) -> dict[str, Any]:
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        return {**config, "partition_assignment_strategy": (RangePartitionAssignor,)}

    def _watch(self, consumer: Any, got: bool) -> None:
        if self._had_partitions:
            if coordinator_unknown(consumer):  # no network call
                self._lost("its coordinator (broker unreachable?)")
            else:
                self._found("its coordinator")

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        try:
            self._consumer.commit(offsets_of(todo), timeout_ms=self._commit_timeout_ms)
        except kafka_errors() as exc:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, exc)
            return False
        return True

    def _group_metadata(self, consumer: Any) -> Any:
        """The consumer's membership, refused once it says "no generation": kafka-python resets
        it when a heartbeat or a commit learns that the group dropped this member (its session
        expired), and the broker does not check a transaction's offsets that carry no
        generation, member or instance id: the commit of a member the group has moved on from
        would land (measured on the test broker: accepted while another member owned the
        partition; with the generation it is refused, as KIP-447 says)."""
        metadata = consumer.group_metadata()
        if getattr(metadata, "generation_id", -1) < 0 or not getattr(metadata, "member_id", ""):
            raise ConnectorError(
                f"group {self.group_id!r} dropped this member (its session expired?): its "
                "offsets are not committed, nor what it did since its last commit; whoever "
                "owns its partitions now reads them again from there"
            )
        return metadata

    def _close_client(self, consumer: Any) -> None:
        try:
            consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
        except kafka_errors() as exc:
            logger.warning("closing the Kafka consumer of %s failed: %r", self.topics, exc)

    # -- the books' broker calls ---------------------------------------------------------------
    def _committed_of(self, consumer: Any, keys: list[TopicPartitionKey]) -> dict[Any, Any]:
        return {key: consumer.committed(_tp(key), timeout_ms=REQUEST_TIMEOUT_MS) for key in keys}

    def _place(
        self, consumer: Any, keys: list[TopicPartitionKey], starts: dict[TopicPartitionKey, int]
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, int]]:
        from kafka.errors import KafkaTimeoutError

        if not keys:
            return {}, {}
        for key, offset in starts.items():
            consumer.seek(_tp(key), offset)
        # auto_offset_reset applies to the others, here rather than by the client: kafka-python
        # keeps the position a partition had when the same member is given it again (an eager
        # rebalance), past records it fetched and nothing processed (a merge's queues, which a
        # new assignment drops: the labels of a shared-model join were skipped so)
        fresh = [_tp(k) for k in keys if k not in starts]
        if fresh:
            latest = str(self._config.get("auto_offset_reset")) in ("latest", "largest")
            (consumer.seek_to_end if latest else consumer.seek_to_beginning)(*fresh)

        def reset_positions() -> dict[TopicPartitionKey, int]:
            found = {k: consumer.position(_tp(k), timeout_ms=REQUEST_TIMEOUT_MS)
                     for k in keys if k not in starts}  # fmt: skip
            if None in found.values():
                raise KafkaTimeoutError(f"no position within {REQUEST_TIMEOUT_MS} ms")
            return found

        positions = {**starts, **self._retrying("finding start positions", reset_positions)}
        ends = self._retrying("reading end offsets", lambda: consumer.end_offsets(
            [_tp(k) for k in keys], timeout_ms=REQUEST_TIMEOUT_MS))  # fmt: skip
        return positions, {(tp.topic, tp.partition): o for tp, o in ends.items()}

    def _log_starts(
        self, consumer: Any, keys: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        firsts = consumer.beginning_offsets([_tp(k) for k in keys], timeout_ms=REQUEST_TIMEOUT_MS)
        return {(tp.topic, tp.partition): int(o) for tp, o in firsts.items()}

    def _stable(self, consumer: Any) -> bool:
        from kafka.structs import MemberState

        return bool(consumer.group_metadata().state == MemberState.STABLE)

    def _assignment_of(self, consumer: Any) -> list[TopicPartitionKey]:
        return sorted((tp.topic, tp.partition) for tp in consumer.assignment())

    def _read_positions(
        self, consumer: Any, keys: list[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        moved = {key: consumer.position(_tp(key), timeout_ms=0) for key in keys}
        return {key: offset for key, offset in moved.items() if offset is not None}

    def _highwaters(self, consumer: Any) -> dict[TopicPartitionKey, int | None]:
        return {(tp.topic, tp.partition): consumer.highwater(tp) for tp in consumer.assignment()}

    # -- rebalances, in a helper thread --------------------------------------------------------
    def _listener(self, consumer: Any) -> Any:
        from kafka import AsyncConsumerRebalanceListener

        source = self

        def keys(partitions: set[Any]) -> list[TopicPartitionKey]:
            return sorted((tp.topic, tp.partition) for tp in partitions)

        class Listener(AsyncConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: set[Any]) -> None:
                await source._in_helper_thread(consumer, source._revoke, keys(revoked))

            async def on_partitions_assigned(self, assigned: set[Any]) -> None:
                await source._in_helper_thread(
                    consumer, lambda k: source._assign(consumer, k), keys(assigned), moot=True
                )

        return Listener()

    async def _in_helper_thread(
        self,
        consumer: Any,
        handler: Callable[[list[TopicPartitionKey]], None],
        keys: list[TopicPartitionKey],
        *,
        moot: bool = False,
    ) -> None:
        """Run ``handler(keys)`` in a new thread while the IO loop goes on; its failure is kept
        for the polling thread to raise, not given to kafka-python (whose close() would then
        stop half-way). ``moot``: a failure once the source is closed is logged, not kept (an
        assignment the close cut short has nothing left to do)."""
        from kafka.future import Future

        done = Future()

        def run() -> None:
            try:
                handler(keys)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the polling thread
                self._keep_failure(exc, keys, moot)
            finally:
                try:
                    call_soon_threadsafe(consumer, lambda: done.success(None))
                except RuntimeError as exc:  # the client's IO loop closed: none awaits it
                    logger.log(logging.DEBUG if self._closed else logging.ERROR,
                               "rebalance callback for %s could not report back: %r",
                               keys, exc)  # fmt: skip

        threading.Thread(target=run, name="kafka-source-rebalance", daemon=True).start()
        await done


# -- the model log ---------------------------------------------------------------------------------
class KafkaModelLog(ModelLogBase):
    """The model topic through kafka-python (``client_options``: security and other
    ``KafkaConsumer`` settings; the admin client takes the ``security_``, ``sasl_`` and ``ssl_``
    ones).

    Examples
    --------
    No connection is made before the first call:

    >>> from connectors.kafka.model_log import ModelLog
    >>> log = KafkaModelLog("127.0.0.1:9", "model")
    >>> isinstance(log, ModelLog)
    True
    >>> log.close()
    """


    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return kafka_errors()

    def _admin(self) -> Any:
        from kafka.admin import KafkaAdminClient

        quiet_close_race()
        security = {k: v for k, v in self._options.items()
                    if k.startswith(("security_", "sasl_", "ssl_"))}  # fmt: skip
        return make_client(lambda: KafkaAdminClient(bootstrap_servers=self._servers, **security),
                           "admin client", self._servers, kafka_errors())  # fmt: skip

    def _topics(self, admin: Any) -> set[str]:
        return set(admin.list_topics())

    def _create_topic(self, admin: Any) -> bool:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        try:  # replication -1: the cluster's default.replication.factor
            admin.create_topics([NewTopic(self.topic, self.create_partitions, -1,
                                          topic_configs=TOPIC_CONFIG)])  # fmt: skip
        except TopicAlreadyExistsError:
            return False  # another worker was first: check it as any existing topic
        return True

    def _partitions(self, admin: Any, topic: str | None = None) -> int | None:
        (described,) = admin.describe_topics([topic or self.topic])
        return len(described["partitions"]) or None

    def _cleanup_policy(self, admin: Any) -> str:
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.TOPIC, self.topic, None)
        configs = admin.describe_configs([resource], config_filter="all")
        return str(configs["topic"][self.topic]["cleanup.policy"]["value"])

    def _close_admin(self, admin: Any) -> None:
        admin.close()

    def _open(self) -> Any:
        from kafka.consumer import KafkaConsumer

        config = merge_client_options(
            {"reconnect_backoff_max_ms": 5000, "max_partition_fetch_bytes": 16 * 1024 * 1024,
             "allow_auto_create_topics": False},
            self._options,
            {"bootstrap_servers": self._servers, "group_id": None, "enable_auto_commit": False,
             "isolation_level": "read_committed"},
            _DESERIALIZERS,
        )  # fmt: skip
        quiet_close_race()
        consumer = KafkaConsumer(**config)
        tp = self._tp()
        consumer.assign([tp])
        if self._next:
            consumer.seek(tp, self._next)
        else:
            consumer.seek_to_beginning()
        self._consumer = consumer
        self._latest = KafkaConsumer(**{**config, "isolation_level": "read_uncommitted"})
        return consumer

    def _tp(self) -> Any:
        return _tp((self.topic, self.partition))

    def _stable_end(self) -> int:
        consumer, tp = self._consumer or self._open(), self._tp()
        return int(consumer.end_offsets([tp], timeout_ms=10_000)[tp])

    def _high(self) -> int | None:
        tp = self._tp()
        return int(self._latest.end_offsets([tp], timeout_ms=10_000)[tp])

    def _position(self) -> int:
        # kafka-python answers None when it could not learn the position in time (a broker
        # just restarted, or starved: a soak beside two CPU hogs met it, and pull-model ended
        # in a TypeError traceback): a ConnectorError, which a worker retries at its next
        # read and pull-model reports in one line
        position = self._consumer.position(self._tp(), timeout_ms=10_000)
        if position is None:
            raise ConnectorError(
                f"{self.kind} {self.topic!r}: the broker gave no read position within 10 s"
            )
        return int(position)

    def _poll(self) -> list[tuple[bytes | None, bytes | None]]:
        polled = self._consumer.poll(timeout_ms=200, max_records=10_000).values()
        out: list[tuple[bytes | None, bytes | None]] = [
            LogRecord(m.key, m.value, m.headers) for messages in polled for m in messages
        ]
        if out:
            self._next = max(m.offset for messages in polled for m in messages) + 1
        return out

    def close(self) -> None:
        for consumer in (self._consumer, self._latest):
            if consumer is not None:
                consumer.close(autocommit=False)
        self._consumer = self._latest = None
