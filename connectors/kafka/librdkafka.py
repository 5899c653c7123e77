"""The confluent-kafka (librdkafka) adapter's consumers: the group source and the model-log
reader, several times faster than kafka-python's (the producers: ``librdkafka_producer``).

confluent-kafka is an optional dependency (``stream-perceptron[rdkafka]``), imported when a
client is created. librdkafka serves rebalance callbacks inside ``consume()``, on the iterating
thread, where blocking calls are allowed: no helper thread is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from itertools import repeat
from operator import is_not
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka.common import (
    HEARTBEAT_MS,
    TopicPartitionKey,
    make_client,
    merge_client_options,
    servers_text,
)
from connectors.kafka.group_source import GroupSource
from connectors.message_block import MessageBlock

__all__ = [
    "CLIENT_DEFAULTS", "RdKafkaSource", "is_fatal", "rdkafka_errors", "require_confluent_kafka",
]

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0  # one broker call made while handling an assignment
#: the input topics' partition counts, asked at an assignment (best effort: a worker's share
#: of a mixing period, GroupBooks.tell_partition_counts)
COUNT_TIMEOUT_S = 2.0

# librdkafka error names that retrying cannot fix (configuration, rights).
_FATAL = frozenset(
    {"_AUTHENTICATION", "_INVALID_ARG", "_UNKNOWN_PROTOCOL", "_UNSUPPORTED_FEATURE",
     "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
     "CLUSTER_AUTHORIZATION_FAILED", "INVALID_SESSION_TIMEOUT", "INVALID_GROUP_ID",
     "FENCED_INSTANCE_ID", "UNSUPPORTED_VERSION", "TOPIC_EXCEPTION",
     # the client handle is being destroyed (a fenced consumer closing): nothing to retry
     "_DESTROY"}
)  # fmt: skip
_BROKERS_DOWN = frozenset({"_ALL_BROKERS_DOWN", "_TRANSPORT"})

#: librdkafka logs through Python logging, critical messages only: it would log every failed
#: reconnection (several a second while a broker is away); errors come to ``error_cb`` instead.
QUIET_LOGS: dict[str, Any] = {"log_level": 2, "logger": logging.getLogger("connectors.rdkafka")}

#: What every librdkafka client here starts from (a client option overrides each):
CLIENT_DEFAULTS: dict[str, Any] = {
    **QUIET_LOGS,
    # a broker that comes back is found within 5 s (librdkafka backs off up to 10 s)
    "reconnect.backoff.max.ms": 5000,
    # A client's first request waited about 50 ms: librdkafka 2.x drops its bootstrap
    # connection once the metadata names the brokers and connects to the one it needs only
    # reconnect.backoff.ms / 2 (at least 11 ms) after its last pick. 20 here (librdkafka's
    # default 100, Java's 50); the backoff of a failing broker still doubles up to the max.
    "reconnect.backoff.ms": 20,
}


def require_confluent_kafka() -> Any:
    """Import and return ``confluent_kafka``, or a ConnectorError saying how to install it."""
    try:
        import confluent_kafka
    except ImportError as exc:
        raise ConnectorError(
            "the Kafka client confluent-kafka is not installed: pip install"
            " 'stream-perceptron[rdkafka]' (or confluent-kafka)"
        ) from exc
    return confluent_kafka


def rdkafka_errors() -> tuple[type[BaseException], ...]:
    """confluent-kafka's exception."""
    return (require_confluent_kafka().KafkaException,)


def is_fatal(error: Any) -> bool:
    """Whether a ``confluent_kafka.KafkaError`` cannot be cured by retrying."""
    return bool(error.fatal()) or error.name() in _FATAL


def _error_of(exc: BaseException) -> Any:
    """The ``KafkaError`` a ``KafkaException`` carries, or ``None``."""
    error = exc.args[0] if exc.args else None
    return error if hasattr(error, "fatal") else None


class _Closing(ConnectorError):
    """The consumer's handle is being destroyed (``_DESTROY``) under a rebalance callback."""


class RdKafkaSource(GroupSource):
    """A :class:`~connectors.kafka.group_source.GroupSource` on confluent-kafka;
    ``client_options`` are librdkafka settings (``security.protocol``, ``sasl.mechanism``,
    ``ssl.ca.location``, ``session.timeout.ms``, ``group.instance.id``...), and ``on_assign``
    / ``on_revoke`` run on the iterating thread, inside a poll. The partition assignment
    strategy must be an eager one (librdkafka's default ``range,roundrobin``).

    Examples
    --------
    No connection is made before :meth:`batches` is iterated:

    >>> source = RdKafkaSource("127.0.0.1:9", ["events"], "learners")
    >>> source.assignment, source.lag(), source.committed_offsets(), source.rebalances
    ([], {}, {}, 0)
    >>> source.close()
    """

    MAX_POLL_RECORDS = 10_000

    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        return merge_client_options(
            {
                "auto.offset.reset": "earliest",
                # Read ahead: librdkafka fetches in its own threads while Python works.
                "queued.max.messages.kbytes": 262144,
                # Once queued.min.messages wait, librdkafka pauses fetching for this long
                # (default 1 s): draining faster than that, a consumer would wait half the
                # time (measured: 120k messages/s instead of 200k here).
                "fetch.queue.backoff.ms": 10,
                # a member learns of a rebalance from its heartbeat's answer (see HEARTBEAT_MS)
                "heartbeat.interval.ms": HEARTBEAT_MS,
                **CLIENT_DEFAULTS,
            },
            client_options,
            {
                "bootstrap.servers": servers_text(bootstrap_servers), "group.id": self.group_id,
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "enable.partition.eof": True,  # tells exit_at_end where a partition ends
                "error_cb": self._client_error,
            },
            ("on_commit",),  # commits are synchronous
        )  # fmt: skip

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return rdkafka_errors()

    def _fatal(self, exc: BaseException) -> bool:
        error = _error_of(exc)
        return error is not None and is_fatal(error)

    def _failed(self, what: str, exc: BaseException) -> ConnectorError:
        error = _error_of(exc)
        if error is not None and error.name() == "_DESTROY":
            return _Closing(f"{what}: the consumer closed")
        return super()._failed(what, exc)

    def _open(self) -> Any:
        ck = require_confluent_kafka()
        config = self._config
        consumer = make_client(lambda: ck.Consumer(config), "consumer",
                               config["bootstrap.servers"], rdkafka_errors())  # fmt: skip
        consumer.subscribe(
            self.topics,
            on_assign=self._guarded(lambda c, keys: self._assign(c, keys)),
            on_revoke=self._guarded(self._revoked),
            on_lost=self._guarded(self._revoked),
        )
        self._consumer = consumer
        logger.info("subscribed to %s as group %r (confluent-kafka)", self.topics, self.group_id)
        return consumer

    def _topic_partitions(self, consumer: Any) -> dict[str, int]:
        try:
            metadata = consumer.list_topics(timeout=self.METADATA_TIMEOUT_S)
        except rdkafka_errors() as exc:
            raise ConnectorError(
                f"cannot reach the Kafka brokers {self._config['bootstrap.servers']} (no topic "
                f"list within {self.METADATA_TIMEOUT_S:g} s): {exc.args[0] if exc.args else exc}"
            ) from exc
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()}

    def _subscribed_partition_counts(self, consumer: Any) -> dict[str, int]:
        counts = {}
        for topic in self.topics:  # one topic's metadata each, not the cluster's
            listed = consumer.list_topics(topic=topic, timeout=COUNT_TIMEOUT_S).topics.get(topic)
            if listed is not None and listed.error is None and listed.partitions:
                counts[topic] = len(listed.partitions)
        return counts

    def _range_assignor(self, config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "partition.assignment.strategy": "range"}

    def _guarded(
        self, handler: Callable[[Any, list[TopicPartitionKey]], None]
    ) -> Callable[[Any, list[Any]], None]:
        """A rebalance callback whose failure is kept for the iterating thread to raise (an
        exception inside librdkafka's callback would leave the assignment half-done)."""

        def callback(consumer: Any, partitions: list[Any]) -> None:
            keys = sorted((tp.topic, tp.partition) for tp in partitions)
            try:
                handler(consumer, keys)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the polling thread
                self._keep_failure(exc, keys, moot=isinstance(exc, _Closing))

        return callback

    def _consume(self, consumer: Any) -> list[MessageBlock]:
        messages = consumer.consume(self._poll_count, self._poll_timeout_ms / 1000)
        if not messages:
            return []
        message_type = type(messages[0])
        errors = list(map(message_type.error, messages))
        if any(map(is_not, errors, repeat(None))):  # (KafkaError == None is an error)
            good = [m for m, error in zip(messages, errors) if error is None]
            for message, error in zip(messages, errors):
                if error is not None:
                    self._message_error(message, error)
            messages = good
        if not messages:
            return []
        return MessageBlock.runs(
            list(map(message_type.topic, messages)), list(map(message_type.partition, messages)),
            list(map(message_type.value, messages)), list(map(message_type.offset, messages)),
            list(map(message_type.key, messages)),
            [t for _, t in map(message_type.timestamp, messages)] if self._timestamps else None,
        )  # fmt: skip

    def _message_error(self, message: Any, error: Any) -> None:
        if error.name() == "_PARTITION_EOF":
            self._note_read({(message.topic(), message.partition()): message.offset()})
        elif is_fatal(error):
            raise ConnectorError(f"consuming {self.topics!r} failed: {error!r}")
        else:
            logger.warning("consuming %s: %r", self.topics, error)

    def _watch(self, consumer: Any, got: bool) -> None:
        if got:
            self._found("the brokers")

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback (served inside ``consume()``): log, note broker loss."""
        if error.name() in _BROKERS_DOWN:
            self._lost(f"the brokers ({error.str()})")
            return
        if is_fatal(error):
            self._callback_error = ConnectorError(f"consuming {self.topics!r} failed: {error!r}")
        logger.warning("Kafka client error for %s: %r", self.topics, error)

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        ck = require_confluent_kafka()
        offsets = [ck.TopicPartition(t, p, o) for (t, p), o in todo.items()]
        try:
            done = self._consumer.commit(offsets=offsets, asynchronous=False)
            failed: Any = [tp for tp in done or [] if tp.error is not None]
        except ck.KafkaException as exc:
            failed = exc
        if failed:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, failed)
        return not failed

    def _group_metadata(self, consumer: Any) -> Any:
        return consumer.consumer_group_metadata()

    def _close_client(self, consumer: Any) -> None:
        try:
            self._revoke(self.assignment)  # librdkafka's own revoke then finds nothing to do
        finally:
            try:
                consumer.close()
            except RuntimeError as exc:  # already closed
                logger.debug("closing the Kafka consumer of %s: %r", self.topics, exc)
            except Exception as exc:  # noqa: BLE001 - confluent_kafka.KafkaException
                logger.warning("closing the Kafka consumer of %s failed: %r", self.topics, exc)

    def _revoked(self, consumer: Any, keys: list[TopicPartitionKey]) -> None:
        try:
            self._revoke(keys)
        finally:
            try:
                consumer.unassign()
            except Exception as exc:  # noqa: BLE001 - confluent_kafka.KafkaException
                logger.debug("unassign after a revocation: %r", exc)

    # -- the books' broker calls ---------------------------------------------------------------
    def _committed_of(self, consumer: Any, keys: list[TopicPartitionKey]) -> dict[Any, Any]:
        ck = require_confluent_kafka()
        found = consumer.committed([ck.TopicPartition(*k) for k in keys], timeout=REQUEST_TIMEOUT_S)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in found}

    def _place(
        self, consumer: Any, keys: list[TopicPartitionKey], starts: dict[TopicPartitionKey, int]
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, int]]:
        ck = require_confluent_kafka()
        positions, ends = dict(starts), {}
        latest = str(self._config.get("auto.offset.reset")) in ("latest", "largest", "end")
        for key in keys:
            low, high = self._retrying("reading end offsets", partial(_watermarks, consumer, key))
            ends[key] = high
            if key not in positions:  # auto.offset.reset applies
                positions[key] = high if latest else low
        consumer.assign([ck.TopicPartition(t, p, positions[(t, p)]) for t, p in keys])
        return positions, ends

    def _log_starts(self, consumer: Any, keys: list[TopicPartitionKey]) -> dict[Any, int]:
        return {key: _watermarks(consumer, key)[0] for key in keys}

    def _assignment_of(self, consumer: Any) -> list[TopicPartitionKey]:
        return sorted((tp.topic, tp.partition) for tp in consumer.assignment())

    def _read_positions(self, consumer: Any, keys: list[TopicPartitionKey]) -> dict[Any, int]:
        ck = require_confluent_kafka()
        moved = consumer.position([ck.TopicPartition(*key) for key in keys])
        return {(tp.topic, tp.partition): tp.offset for tp in moved if tp.offset >= 0}

    def _highwaters(self, consumer: Any) -> dict[TopicPartitionKey, int | None]:
        ck, highwaters = require_confluent_kafka(), {}
        for key in self.assignment:
            try:
                _low, high = consumer.get_watermark_offsets(ck.TopicPartition(*key), cached=True)
            except ck.KafkaException:
                continue
            highwaters[key] = high if high >= 0 else None
        return highwaters


def _watermarks(consumer: Any, key: TopicPartitionKey) -> tuple[int, int]:
    """The first offset a partition keeps and its end, asked of the broker."""
    tp = require_confluent_kafka().TopicPartition(*key)
    low, high = consumer.get_watermark_offsets(tp, timeout=REQUEST_TIMEOUT_S)
    return int(low), int(high)
