"""Kafka source: consume topics as a member of a consumer group.

:class:`KafkaSource` yields each poll's messages as one batch of
:class:`~connectors.record.Record`, lets the caller choose where newly assigned
partitions start (its checkpoint) and commits offsets only when asked.

kafka-python (3.x) is imported lazily, so importing :mod:`connectors` stays fast.
"""

from __future__ import annotations

import logging
import time
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from connectors import kafka_client
from connectors.base import PartitionedSource
from connectors.errors import ConnectorError
from connectors.kafka_base import PollUnit
from connectors.kafka_common import (
    TopicPartitionKey,
    fatal_errors,
    make_client,
    merge_client_options,
    needs_split,
    split_message,
)
from connectors.kafka_progress import ProgressTracking
from connectors.kafka_rebalance import RETRY_PAUSE_S, RebalanceHandling
from connectors.message_block import MessageBlock
from connectors.record import Position, Record, build_message_records

if TYPE_CHECKING:
    from kafka.consumer import KafkaConsumer

__all__ = ["KafkaSource", "TopicPartitionKey", "split_message"]

logger = logging.getLogger(__name__)

_value, _key, _offset = attrgetter("value"), attrgetter("key"), attrgetter("offset")


# Set by the source itself; a client option may not override them.
_RESERVED_CONSUMER_OPTIONS = frozenset(
    {
        "bootstrap_servers",
        "group_id",
        "enable_auto_commit",
        "max_poll_records",
        "key_deserializer",
        "value_deserializer",
    }
)


class KafkaSource(RebalanceHandling, ProgressTracking, PartitionedSource):
    """Consume Kafka topics in a consumer group, in batches of records.

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    topics
        Topics to subscribe to.
    group_id
        Consumer group; partitions are shared among the group's members.
    on_assign
        Called with newly assigned partitions; returns the offsets the caller
        wants to resume from (its checkpoint), for any of them. Each partition
        starts at the larger of that offset and the group's committed offset;
        with neither, ``auto_offset_reset`` (``"earliest"``) applies.
    on_revoke
        Called with partitions about to be given up (rebalance, or
        :meth:`close`), while they can still be committed: checkpoint and call
        :meth:`commit` in it. Only partitions reported by ``on_assign`` are
        passed. Also called when the group membership was lost (the commit
        then fails).
    on_idle
        Called, from the iterating thread between two batches, after a poll
        that returned no message: time for timed work such as a checkpoint
        of what the last batches did.
    exit_at_end
        Stop iterating once the group is stable, partitions are assigned and
        each is read up to the end offset it had when it was assigned. An
        empty assignment never ends the iteration: a member with nothing to
        read waits for partitions.
    hold_at_end
        With ``exit_at_end``, asked once this member's partitions are read to
        their end: while it returns True the member stays (polling every
        ``HOLD_POLL_MS``, calling ``on_idle``) instead of ending, for a member
        whose timed work others still depend on.
    poll_timeout_ms
        Longest wait for messages in one poll.
    max_poll_records
        Most messages per poll, hence per batch.
    split_lines
        Make one record per line of a message (see :func:`split_message`),
        all with the message's position; otherwise one record per message.
    client_options
        Further kafka-python ``KafkaConsumer`` settings (``security_protocol``,
        ``sasl_mechanism``, ``ssl_cafile``, ``session_timeout_ms``...). The
        source sets ``reconnect_backoff_max_ms=5000`` (a returning broker is
        found within seconds) unless given here.
    commit_timeout_ms
        Longest wait of :meth:`commit` for the broker.
    assignment_timeout_s
        With ``exit_at_end``, how long an empty assignment is waited out before
        it is an error (a group still rebalancing is waited for without end,
        with a warning this often); also the longest time spent retrying the
        broker calls that handle an assignment.

    Attributes
    ----------
    rebalances : int
        Number of times the assignment changed (the first one included); a
        rebalance that gives back the same partitions does not count.

    Notes
    -----
    *Threads.* ``on_assign``, ``on_revoke`` and the broker calls that go with
    an assignment run in a short-lived helper thread, while the thread that
    called ``next()`` on :meth:`batches` (or :meth:`close`) waits inside
    kafka-python, so they never run concurrently with that thread's code.
    kafka-python runs its own network thread (heartbeats), so a slow callback
    does not cost the group membership. An exception raised by a callback is
    re-raised unchanged by :meth:`batches` (or :meth:`close`).

    *Broker outages.* Iteration goes on: polls return nothing while the
    broker is away (losing and finding the group coordinator is logged) and
    kafka-python reconnects by itself; a poll that raises a retriable error
    is logged and retried after a short pause. Errors that retrying cannot
    fix (authorization, configuration) raise
    :class:`~connectors.errors.ConnectorError`. :meth:`commit` returns
    ``False`` while the broker is away. If the group membership expired
    meanwhile, the partitions are revoked (``on_revoke``; its commit fails)
    and assigned again (``on_assign``), resuming at the checkpoint.

    *Lag.* :meth:`lag` uses end offsets read at assignment, then the high
    watermarks of fetch responses (refreshed every few seconds); it makes no
    network call and is safe to call from another thread.

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
        config = merge_client_options(
            {  # a mistyped --topic is not created by reading it
                "auto_offset_reset": "earliest",
                "reconnect_backoff_max_ms": 5000,
                "allow_auto_create_topics": False,
            },
            client_options,
            _RESERVED_CONSUMER_OPTIONS,
        )
        config.update(
            bootstrap_servers=bootstrap_servers,
            group_id=self.group_id,
            enable_auto_commit=False,
            max_poll_records=self._max_poll_records,
        )
        return config

    # -- the client ----------------------------------------------------------------------------
    def _open(self) -> KafkaConsumer:
        from kafka.consumer import KafkaConsumer
        from kafka.errors import KafkaError

        servers = self._config["bootstrap_servers"]
        consumer = make_client(
            lambda: KafkaConsumer(**self._config), "consumer", servers, (KafkaError,), self._config
        )
        try:
            kafka_client.require_internals(consumer)
        except ConnectorError:
            consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
            raise
        consumer.subscribe(topics=self.topics, listener=self._listener(consumer))
        self._consumer = consumer
        logger.info("subscribed to %s as group %r", self.topics, self.group_id)
        return consumer

    def _topic_names(self, consumer: KafkaConsumer) -> set[str]:
        from kafka.errors import KafkaError

        try:
            return set(consumer.topics())
        except KafkaError as exc:
            raise ConnectorError(
                f"cannot list the topics of {self._config['bootstrap_servers']}: {exc!r}"
            ) from exc

    def _poll(self, consumer: KafkaConsumer) -> list[PollUnit]:
        from kafka.errors import KafkaError

        try:
            polled = consumer.poll(timeout_ms=self._poll_timeout_ms, max_records=self._poll_count)
        except KafkaError as exc:
            self._raise_callback_error()
            if isinstance(exc, fatal_errors()):
                raise ConnectorError(f"consuming {self.topics!r} failed: {exc!r}") from exc
            logger.warning("polling %s failed, retrying: %r", self.topics, exc)
            time.sleep(RETRY_PAUSE_S)
            return []
        self._raise_callback_error()
        self._refresh_ends(consumer)
        self._watch_coordinator(consumer)
        if not polled:
            return []
        units = self._units(polled)
        records = sum(len(u) if isinstance(u, list) else u.count for u in units)
        self._note_batch(sum(map(len, polled.values())), records)
        return units

    def _units(self, polled: dict[Any, list[Any]]) -> list[PollUnit]:
        """The records of one poll, built in bulk (C-level loops) unless a message holds
        several lines, or with ``_as_blocks`` each partition's messages as one block."""
        records: list[Record] = []
        units: list[PollUnit] = []
        positions: dict[TopicPartitionKey, int] = {}
        for tp, messages in polled.items():
            if not messages:
                continue
            topic, partition, n = tp.topic, tp.partition, len(messages)
            values = list(map(_value, messages))
            if None in values:  # tombstones
                values = [b"" if v is None else v for v in values]
            split = self._split_lines and needs_split(values)
            block = None
            if self._as_blocks:
                offsets, keys = list(map(_offset, messages)), list(map(_key, messages))
                block = MessageBlock(topic, partition, values, offsets, keys)
                if split:
                    block = block.split_lines()  # None: split message by message below
            if block is not None:
                if records:
                    units.append(records)
                    records = []
                units.append(block)
            elif split:
                for message, value in zip(messages, values):
                    position = Position(topic, message.offset, partition)
                    if b"\n" in value or value.endswith(b"\r"):
                        records.extend(Record(line, position, message.key)
                                       for line in split_message(value))  # fmt: skip
                    else:
                        records.append(Record(value, position, message.key))
            else:
                records += build_message_records(
                    values,
                    map(_key, messages),
                    repeat(topic, n),
                    map(_offset, messages),
                    repeat(partition, n),
                )
            positions[(topic, partition)] = messages[-1].offset + 1
        self._note_read(positions)
        if records:
            units.append(records)
        return units

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        offsets = {TopicPartition(*tp): OffsetAndMetadata(o, "", -1) for tp, o in todo.items()}
        try:
            self._consumer.commit(offsets, timeout_ms=self._commit_timeout_ms)
        except KafkaError as exc:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, exc)
            return False
        return True

    def _group_metadata(self, consumer: KafkaConsumer) -> Any:
        return consumer.group_metadata()

    def _close_client(self, consumer: KafkaConsumer) -> None:
        from kafka.errors import KafkaError

        try:
            consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
        except KafkaError as exc:
            logger.warning("closing the Kafka consumer of %s failed: %r", self.topics, exc)
