"""Kafka source on confluent-kafka (librdkafka): the same behaviour as
:class:`~connectors.kafka_source.KafkaSource`, several times faster.

confluent-kafka is an optional dependency (``stream-perceptron[rdkafka]``), imported when the
consumer is created. librdkafka serves rebalance callbacks inside ``consume()``, on the
iterating thread, where blocking calls (committed offsets, commits, watermarks) are allowed, so
no helper thread is needed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from itertools import repeat
from operator import is_not
from typing import Any

from connectors.base import PartitionedSource
from connectors.errors import ConnectorError
from connectors.kafka_base import GroupSource, PollUnit
from connectors.kafka_common import (
    TopicPartitionKey,
    last_offsets,
    make_client,
    merge_client_options,
    needs_split,
    servers_text,
    split_message,
)
from connectors.message_block import MessageBlock
from connectors.record import Position, Record, build_message_records

__all__ = ["RdKafkaSource", "require_confluent_kafka"]

logger = logging.getLogger("connectors.kafka_source")  # the sources' own log

REQUEST_TIMEOUT_S = 10.0  # one broker call made while handling an assignment
RETRY_PAUSE_S = 0.5
LAG_REFRESH_S = 2.0

# Set by the source itself; a client option may not override them.
_RESERVED_CONSUMER_OPTIONS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "on_commit",
        "error_cb",
    }
)

# librdkafka error names that retrying cannot fix (configuration, rights).
_FATAL = frozenset(
    {
        "_AUTHENTICATION",
        "_INVALID_ARG",
        "_UNKNOWN_PROTOCOL",
        "_UNSUPPORTED_FEATURE",
        "SASL_AUTHENTICATION_FAILED",
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "INVALID_SESSION_TIMEOUT",
        "INVALID_GROUP_ID",
        "FENCED_INSTANCE_ID",
        "UNSUPPORTED_VERSION",
        "TOPIC_EXCEPTION",
        # the client handle is being destroyed (a fenced consumer closing): nothing to retry
        "_DESTROY",
    }
)
_BROKERS_DOWN = frozenset({"_ALL_BROKERS_DOWN", "_TRANSPORT"})

#: librdkafka logs through Python logging, critical messages only: it would log every failed
#: reconnection (several a second while a broker is away); errors come to ``error_cb`` instead.
QUIET_LOGS: dict[str, Any] = {"log_level": 2, "logger": logging.getLogger("connectors.rdkafka")}


def require_confluent_kafka() -> Any:
    """Import and return ``confluent_kafka``, or say how to install it.

    Raises
    ------
    ConnectorError
        If confluent-kafka is not installed.
    """
    try:
        import confluent_kafka
    except ImportError as exc:
        raise ConnectorError(
            "the Kafka client confluent-kafka is not installed: pip install"
            " 'stream-perceptron[rdkafka]' (or confluent-kafka)"
        ) from exc
    return confluent_kafka


class _Closing(ConnectorError):
    """The consumer's handle is being destroyed (``_DESTROY``) under a rebalance callback."""


def is_fatal(error: Any) -> bool:
    """Whether a ``confluent_kafka.KafkaError`` cannot be cured by retrying."""
    return bool(error.fatal()) or error.name() in _FATAL


class RdKafkaSource(GroupSource, PartitionedSource):
    """Consume Kafka topics in a consumer group with confluent-kafka, in batches of records.

    The parameters, guarantees and threads are those of
    :class:`~connectors.kafka_source.KafkaSource`, except that ``client_options`` are
    librdkafka settings (``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``,
    ``session.timeout.ms``, ``group.instance.id``...), and that ``on_assign`` / ``on_revoke``
    run on the iterating thread, inside a poll. The partition assignment strategy must be an
    eager one (librdkafka's default ``range,roundrobin``).

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
        config = merge_client_options(
            {
                "auto.offset.reset": "earliest",
                "reconnect.backoff.max.ms": 5000,
                # Read ahead: librdkafka fetches in its own threads while Python works.
                "queued.max.messages.kbytes": 262144,
                # Once queued.min.messages wait, librdkafka pauses fetching for this long
                # (default 1 s): draining faster than that, a consumer would wait half the
                # time (measured: 120k messages/s instead of 200k here).
                "fetch.queue.backoff.ms": 10,
                **QUIET_LOGS,
            },
            client_options,
            _RESERVED_CONSUMER_OPTIONS,
        )
        config.update(
            {
                "bootstrap.servers": servers_text(bootstrap_servers),
                "group.id": self.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,  # tells exit_at_end where a partition ends
                "error_cb": self._client_error,
            }
        )
        return config

    # -- the client ----------------------------------------------------------------------------
    def _open(self) -> Any:
        ck = require_confluent_kafka()
        servers = self._config["bootstrap.servers"]
        consumer = make_client(
            lambda: ck.Consumer(self._config), "consumer", servers, (ck.KafkaException,)
        )
        consumer.subscribe(
            self.topics,
            on_assign=self._guarded(self._assigned_now),
            on_revoke=self._guarded(self._revoked),
            on_lost=self._guarded(self._revoked),
        )
        self._consumer = consumer
        logger.info("subscribed to %s as group %r (confluent-kafka)", self.topics, self.group_id)
        return consumer

    def _topic_names(self, consumer: Any) -> set[str]:
        ck = require_confluent_kafka()
        try:
            metadata = consumer.list_topics(timeout=self.METADATA_TIMEOUT_S)
        except ck.KafkaException as exc:
            raise ConnectorError(
                f"cannot reach the Kafka brokers {self._config['bootstrap.servers']} (no topic "
                f"list within {self.METADATA_TIMEOUT_S:g} s): {exc.args[0] if exc.args else exc}"
            ) from exc
        return set(metadata.topics)

    def _guarded(
        self, handler: Callable[[Any, list[Any]], None]
    ) -> Callable[[Any, list[Any]], None]:
        """A rebalance callback whose failure is kept for the iterating thread to raise (an
        exception inside librdkafka's callback would leave the assignment half-done)."""

        def callback(consumer: Any, partitions: list[Any]) -> None:
            try:
                handler(consumer, partitions)
            except _Closing as exc:
                if not self._closed:
                    logger.error("rebalance callback for %s failed: %r", partitions, exc)
                    self._callback_error = exc
                else:  # stopping: an assignment the close interrupted has nothing to do
                    logger.info("rebalance callback for %s ended by the close", partitions)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the polling thread
                logger.error("rebalance callback for %s failed: %r", partitions, exc)
                self._callback_error = exc

        return callback

    def _poll(self, consumer: Any) -> list[PollUnit]:
        ck = require_confluent_kafka()
        try:
            messages = consumer.consume(self._poll_count, self._poll_timeout_ms / 1000)
        except ck.KafkaException as exc:
            self._raise_callback_error()
            error = exc.args[0] if exc.args else None
            if error is not None and hasattr(error, "fatal") and is_fatal(error):
                raise ConnectorError(f"consuming {self.topics!r} failed: {exc!r}") from exc
            logger.warning("polling %s failed, retrying: %r", self.topics, exc)
            time.sleep(RETRY_PAUSE_S)
            return []
        self._raise_callback_error()
        self._refresh_ends(consumer)
        if not messages:
            return []
        return self._units(messages)

    def _units(self, messages: list[Any]) -> list[PollUnit]:
        """The records of one poll, built in bulk (C-level loops) unless a message holds
        several lines, or with ``_as_blocks`` each partition's run of messages as a block;
        end-of-partition events move the positions."""
        message_type = type(messages[0])
        errors = list(map(message_type.error, messages))
        positions: dict[TopicPartitionKey, int] = {}
        if any(map(is_not, errors, repeat(None))):  # (KafkaError == None is an error)
            good = [m for m, error in zip(messages, errors) if error is None]
            for message, error in zip(messages, errors):
                if error is not None:
                    self._message_error(message, error, positions)
            messages = good
        records: list[Record] = []
        units: list[PollUnit] = []
        if messages:
            values = list(map(message_type.value, messages))
            if None in values:  # tombstones
                values = [b"" if v is None else v for v in values]
            split = self._split_lines and needs_split(values)
            blocks = _blocks(messages, values, split) if self._as_blocks else None
            if blocks is not None:
                for block in blocks:
                    positions[(block.topic, block.partition)] = block.end
                units = list(blocks)
            elif split:
                records = self._split_records(messages, values)
            else:
                records = build_message_records(
                    values,
                    map(message_type.key, messages),
                    map(message_type.topic, messages),
                    map(message_type.offset, messages),
                    map(message_type.partition, messages),
                )
            if records:
                positions.update(last_offsets(records, max(1, len(self._assigned))))
                units = [records]
        if units and self._lost_since is not None:
            logger.info(
                "group %r reached the brokers again after %.1f s",
                self.group_id,
                time.monotonic() - self._lost_since,
            )
            self._lost_since = None
        self._note_read(positions)
        read = sum(len(unit) if isinstance(unit, list) else unit.count for unit in units)
        self._note_batch(len(messages), read)
        return units

    @staticmethod
    def _split_records(messages: list[Any], values: list[bytes]) -> list[Record]:
        records: list[Record] = []
        append = records.append
        for message, value in zip(messages, values):
            position = Position(message.topic(), message.offset(), message.partition())
            key = message.key()
            if b"\n" in value or value.endswith(b"\r"):
                for line in split_message(value):
                    append(Record(line, position, key))
            else:
                append(Record(value, position, key))
        return records

    def _message_error(
        self, message: Any, error: Any, positions: dict[TopicPartitionKey, int]
    ) -> None:
        if error.name() == "_PARTITION_EOF":
            key = (message.topic(), message.partition())
            positions[key] = max(message.offset(), positions.get(key, 0))
            return
        if is_fatal(error):
            raise ConnectorError(f"consuming {self.topics!r} failed: {error!r}")
        logger.warning("consuming %s: %r", self.topics, error)

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        ck = require_confluent_kafka()
        offsets = [ck.TopicPartition(t, p, o) for (t, p), o in todo.items()]
        try:
            done = self._consumer.commit(offsets=offsets, asynchronous=False)
        except ck.KafkaException as exc:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, exc)
            return False
        failed = [tp for tp in done or [] if tp.error is not None]
        if failed:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, failed)
            return False
        return True

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

    def _client_error(self, error: Any) -> None:
        """librdkafka's error callback (served inside ``consume()``): log, note broker loss."""
        if error.name() in _BROKERS_DOWN:
            if self._lost_since is None and self._had_partitions:
                self._lost_since = time.monotonic()
                logger.warning(
                    "group %r lost the brokers (%s); reconnecting", self.group_id, error.str()
                )
            return
        if is_fatal(error):
            self._callback_error = ConnectorError(f"consuming {self.topics!r} failed: {error!r}")
        logger.warning("Kafka client error for %s: %r", self.topics, error)

    # -- the group -----------------------------------------------------------------------------
    def _assigned_now(self, consumer: Any, partitions: list[Any]) -> None:
        ck = require_confluent_kafka()
        self._joined = True  # the group has settled an assignment (maybe empty) for this member
        tps = sorted(partitions, key=lambda tp: (tp.topic, tp.partition))
        keys = [(tp.topic, tp.partition) for tp in tps]
        if not tps:
            consumer.assign([])
            self._count_change(keys)
            logger.info("group %r assigned no partitions of %s", self.group_id, self.topics)
            return
        found = self._retrying(
            "reading committed offsets", lambda: consumer.committed(tps, timeout=REQUEST_TIMEOUT_S)
        )
        committed: dict[TopicPartitionKey, int | None] = {
            (tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in found
        }
        wanted, positions = self._starts(keys, committed)
        ends: dict[TopicPartitionKey, int] = {}
        for key in keys:
            low, high = self._retrying(
                "reading end offsets", partial(_watermarks, consumer, ck.TopicPartition(*key))
            )
            ends[key] = high
            if key not in positions:  # auto.offset.reset applies
                latest = str(self._config.get("auto.offset.reset")) in ("latest", "largest", "end")
                positions[key] = high if latest else low
        consumer.assign([ck.TopicPartition(t, p, positions[(t, p)]) for t, p in keys])
        self._note_assigned(keys, positions, ends, committed, wanted)

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        try:
            self._revoke([(tp.topic, tp.partition) for tp in partitions])
        finally:
            try:
                consumer.unassign()
            except Exception as exc:  # noqa: BLE001 - confluent_kafka.KafkaException
                logger.debug("unassign after a revocation: %r", exc)

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        ck = require_confluent_kafka()
        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            try:
                return call()
            except ck.KafkaException as exc:
                error = exc.args[0] if exc.args else None
                fatal = error is not None and hasattr(error, "fatal") and is_fatal(error)
                if fatal and error is not None and error.name() == "_DESTROY":
                    raise _Closing(f"{what} for {self.topics!r}: the consumer closed") from exc
                if fatal or time.monotonic() > deadline:
                    raise ConnectorError(f"{what} for {self.topics!r} failed: {exc!r}") from exc
                logger.warning("%s for %s failed, retrying: %r", what, self.topics, exc)
                time.sleep(RETRY_PAUSE_S)

    # -- progress ------------------------------------------------------------------------------
    def _at_end(self, consumer: Any, *, refresh: bool) -> bool:
        current = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
        pending = self._pending(current)
        if pending is None:
            return False  # nothing assigned yet, or an assignment is being handled
        if pending and refresh:  # positions can move past non-message records
            ck = require_confluent_kafka()
            try:
                moved = consumer.position([ck.TopicPartition(*tp) for tp in pending])
            except ck.KafkaException as exc:
                logger.debug("reading positions failed: %r", exc)
                return False
            self._note_read({(tp.topic, tp.partition): tp.offset for tp in moved if tp.offset >= 0})
            pending = self._pending(current) or []
        return not pending

    def _refresh_ends(self, consumer: Any) -> None:
        now = time.monotonic()
        if now - self._ends_refreshed < LAG_REFRESH_S:
            return
        self._ends_refreshed = now
        ck = require_confluent_kafka()
        highwaters: dict[TopicPartitionKey, int | None] = {}
        for key in self.assignment:
            try:
                _low, high = consumer.get_watermark_offsets(ck.TopicPartition(*key), cached=True)
            except ck.KafkaException:
                continue
            highwaters[key] = high if high >= 0 else None
        self._note_ends(highwaters)


def _blocks(messages: list[Any], values: list[bytes], split: bool) -> list[MessageBlock] | None:
    """The messages of a poll (no error among them) as one block per run of one partition, with
    ``split`` their lines as records (``None`` when some cannot be split in bulk)."""
    blocks = _runs(messages, values)
    if not split:
        return blocks
    lines = [block.split_lines() for block in blocks]
    return None if None in lines else [block for block in lines if block is not None]


def _runs(messages: list[Any], values: list[bytes]) -> list[MessageBlock]:
    message_type = type(messages[0])
    offsets = list(map(message_type.offset, messages))
    keys = list(map(message_type.key, messages))
    partitions = list(map(message_type.partition, messages))
    topics = list(map(message_type.topic, messages))
    n = len(messages)
    if partitions.count(partitions[0]) == n and topics.count(topics[0]) == n:
        return [MessageBlock(topics[0], partitions[0], values, offsets, keys)]
    blocks: list[MessageBlock] = []
    start = 0
    for i in range(1, n + 1):
        if i == n or partitions[i] != partitions[start] or topics[i] != topics[start]:
            blocks.append(
                MessageBlock(
                    topics[start], partitions[start], values[start:i], offsets[start:i],
                    keys[start:i],
                )  # fmt: skip
            )
            start = i
    return blocks


def _watermarks(consumer: Any, tp: Any) -> tuple[int, int]:
    low, high = consumer.get_watermark_offsets(tp, timeout=REQUEST_TIMEOUT_S)
    return low, high
