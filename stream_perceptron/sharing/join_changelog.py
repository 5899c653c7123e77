"""Shared-model mode's join (``--join-key`` with ``--labels-topic``) kept in Kafka.

Each partition task's pending events and outcomes (:mod:`stream_perceptron.join.tasks`) go to
the same partition of a compacted changelog topic, co-partitioned with the events topic, in
every commit's transaction: the records of the keys that changed since the last commit, then
the task's own record (its clock and stream time). The transaction also holds the task's
offsets and the increment that learned what it joined, so the changelog, the offsets and the
model move together: a ``kill -9`` loses exactly the open transaction, and the task's next
owner (the same worker restarted, or another after a rebalance) reads the partition back to
its stable end (past any transaction still open) and goes on from the last commit. Why a topic
of its own rather than the model topic: every worker reads the whole model topic, so every
pending event would be read by all.

With the group's key (``--model-topic-key-file``) each record is signed (an HMAC header, in a
domain of its own, :meth:`~stream_perceptron.sharing.signing.RecordSigner.for_join_changelog`),
and a record read back without the group's signature is refused: counted by reason
(``unsigned``, ``bad_signature``), logged, and left out of the task (a forged event would
otherwise be learned with a real outcome's label).

Examples
--------
>>> from connectors import Position
>>> from stream_perceptron.join.tasks import JoinTasks
>>> class Output:
...     def __init__(self): self.sent = []
...     def send(self, topic, value, key=None, headers=None, partition=None):
...         self.sent.append((topic, partition, key, value is None))
>>> class Log:  # one partition of the changelog, as a ModelLog reads it
...     def __init__(self, records): self.records = records
...     def read_new(self, timeout_s=30.0): return self.records
...     def close(self): pass
>>> tasks, output = JoinTasks(10, 5, "events"), Output()
>>> task = tasks.of(Position("events", 0, 3))
>>> task.store.add_event("k", {"f": 1.0}, 0, ("events", 3), offset=0, now=task.tick())
>>> log = JoinChangelog(tasks, "pending", lambda p: Log([]), output)
>>> log.write([3])
2
>>> output.sent
[('pending', 3, b'k', False), ('pending', 3, b'', False)]

A record without the group's signature is left out when the task is read back:

>>> from connectors.kafka.model_log import LogRecord
>>> from stream_perceptron.sharing.signing import RecordSigner
>>> signer = RecordSigner(b"s" * 32).for_join_changelog()
>>> value = b'{"v":1,"kind":"task","records":7,"time":null}'
>>> signed = LogRecord(b"", value, signer.headers(b"", value))
>>> unsigned = LogRecord(b"", value.replace(b"7", b"9"))  # a stranger's, after it
>>> log = JoinChangelog(tasks, "pending", lambda p: Log([signed, unsigned]), output, signer)
>>> log.restore([1])
>>> tasks.tasks()[1].records, dict(log.refused)
(7, {'unsigned': 1})
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from connectors.kafka.model_log import ModelLog
from stream_perceptron.errors import EngineError, StateError
from stream_perceptron.join.tasks import JoinTasks
from stream_perceptron.sharing.records import RecordFormatError
from stream_perceptron.sharing.signing import RecordSigner

__all__ = ["JoinChangelog"]

logger = logging.getLogger(__name__)


class JoinChangelog:
    """A worker's tasks and their changelog topic.

    Parameters
    ----------
    tasks
        The engine's stores, one per partition task.
    topic
        The changelog topic (compacted, as many partitions as the events topic).
    reader
        A reader of one partition of it (``reader(p)``, closed after one read to its end).
    output
        The worker's transactions (each commit's changes go in them).
    signer
        The group's key for the changelog (``None``: records are neither signed nor checked).
    """

    def __init__(self, tasks: JoinTasks, topic: str, reader: Callable[[int], ModelLog],
                 output: Any, signer: RecordSigner | None = None) -> None:  # fmt: skip
        self.tasks = tasks
        self.topic = topic
        self.reader = reader
        self.output = output
        self.signer = signer
        self.restored = 0  # records read back
        self.written = 0  # records sent
        self.refused: Counter[str] = Counter()  # records read back without the group's key

    def start(self) -> None:
        """Create the changelog topic when missing, else check it (as many partitions as the
        events topic, compacted only)."""
        log: Any = self.reader(0)
        try:
            log.ensure_changelog(self.tasks.events_topic)
        finally:
            log.close()

    def write(self, partitions: Iterable[int]) -> int:
        """Send the changes of the tasks of ``partitions`` into the open transaction; how
        many records."""
        sent = 0
        for partition in sorted(set(partitions)):
            for key, value in self.tasks.changes(partition):
                headers = None if self.signer is None else self.signer.headers(key, value)
                self.output.send(self.topic, value, key, headers=headers, partition=partition)
                sent += 1
        self.written += sent
        return sent

    def restore(self, partitions: Iterable[int]) -> None:
        """The tasks of ``partitions`` from their changelog partitions (before their first
        record)."""
        for partition in sorted(set(partitions)):
            started = time.monotonic()
            log = self.reader(partition)
            try:
                records = log.read_new()
            finally:
                log.close()
            if self.signer is not None:
                records = self._signed(partition, records)
            try:
                self.tasks.restore(partition, records)
            except StateError as e:
                raise EngineError(
                    f"the join changelog {self.topic!r} partition {partition} cannot be read "
                    f"back: {e}"
                ) from None
            self.restored += len(records)
            task = self.tasks.tasks()[partition]
            logger.info(
                "restored the join of partition %d from %d changelog records in %.3f s: %d "
                "events and %d outcomes waiting, clock %d", partition, len(records),
                time.monotonic() - started, task.store.events, task.store.outcomes,
                task.records,
            )  # fmt: skip

    def _signed(self, partition: int, records: list[Any]) -> list[Any]:
        """The records the group's key signed; the others counted and logged."""
        assert self.signer is not None
        kept, refused = [], Counter[str]()
        for record in records:
            key, value = record
            try:
                self.signer.check(key, value, getattr(record, "headers", None))
            except RecordFormatError as e:
                refused[e.reason] += 1
                continue
            kept.append(record)
        if refused:
            self.refused.update(refused)
            logger.warning("refused %d records of the join changelog %r partition %d without "
                           "the group's signature: %s", sum(refused.values()), self.topic,
                           partition, dict(refused))  # fmt: skip
        return kept

    def drop(self, partitions: Iterable[int]) -> None:
        """Forget the tasks of ``partitions`` (committed, and another worker's now)."""
        for partition in set(partitions):
            self.tasks.drop(partition)
