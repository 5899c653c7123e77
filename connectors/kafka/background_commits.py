"""A transaction committing in the background while the next one fills.

Flink's asynchronous checkpoints and Kafka Streams' commit interval keep the records flowing
while a checkpoint or a commit goes to the broker; :class:`BackgroundCommits` does that for a
:class:`~connectors.kafka.transactions.TransactionalOutput`: :meth:`commit_in_background`
hands the open transaction to a thread and returns at once; what is sent meanwhile is held in
memory for the next transaction (a transactional producer has one transaction open at a time)
and sent once the one in flight landed. One transaction is in flight at most: the next commit,
or :meth:`land`, waits for it first.

A commit in flight that fails leaves its transaction as the wrapped output left it (aborted,
or in doubt): :meth:`land` raises the failure, :meth:`retry` commits it again, and only then
are the held messages sent, into a new transaction. They never join the failed one's resend,
so every message stays in the transaction of the offsets it came before.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from connectors.kafka.common import TopicPartitionKey
from connectors.kafka.transactions import TransactionalOutput

__all__ = ["BackgroundCommits"]

logger = logging.getLogger(__name__)

_Message = tuple[str, bytes | None, bytes | None, Any, int | None]


class BackgroundCommits:
    """A :class:`~connectors.kafka.transactions.TransactionalOutput` that can commit in the
    background.

    Parameters
    ----------
    output
        The transactions committed (one producer; only this wrapper's thread or its caller
        calls it, never both at once).

    Examples
    --------
    >>> class Memory:
    ...     def __init__(self): self.log, self.open = [], []
    ...     def send(self, topic, value, key=None, headers=None, partition=None):
    ...         self.open.append(value)
    ...     def commit(self, offsets, group_metadata):
    ...         self.log.append((self.open, offsets)); self.open = []
    >>> out = BackgroundCommits(Memory())
    >>> out.send("t", b"a")
    >>> out.commit_in_background({("t", 0): 1}, "group")
    >>> out.send("t", b"b")  # held for the next transaction
    >>> out.held
    1
    >>> out.land()
    >>> out.commit({("t", 0): 2}, "group")
    >>> out.output.log
    [([b'a'], {('t', 0): 1}), ([b'b'], {('t', 0): 2})]
    """

    def __init__(self, output: TransactionalOutput) -> None:
        self.output = output
        self._lock = threading.Lock()
        self._held: list[_Message] = []
        #: sends are held: a commit is in flight, or it failed and was not committed again
        self._holding = False
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        #: seconds the caller waited in :meth:`land` for a commit in flight
        self.waited_s = 0.0

    def start(self) -> None:
        self.output.start()

    def send(
        self, topic: str, value: bytes | None, key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
    ) -> None:  # fmt: skip
        """Into the open transaction; while one commits, held for the next."""
        with self._lock:
            if self._holding:
                self._held.append((topic, None if value is None else bytes(value), key,
                                   headers, partition))  # fmt: skip
                return
            self._send(topic, value, key, headers, partition)

    def _send(self, topic: str, value: bytes | None, key: bytes | None, headers: Any,
              partition: int | None) -> None:  # fmt: skip
        if partition is None:  # the wrapped output may not take it (its own partitioner)
            self.output.send(topic, value, key, headers=headers)
        else:
            self.output.send(topic, value, key, headers=headers, partition=partition)

    def commit(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        """Commit now: after the one in flight (whose failure is raised instead)."""
        self.land()
        self.output.commit(offsets, group_metadata)

    def commit_in_background(
        self, offsets: dict[TopicPartitionKey, int], group_metadata: Any
    ) -> None:
        """Commit the open transaction in a thread, after the one in flight landed (whose
        failure is raised instead, nothing started)."""
        self.land()
        with self._lock:
            self._holding = True
            self._thread = threading.Thread(
                target=self._commit, args=(offsets, group_metadata),
                name="stream-perceptron-commit", daemon=True,
            )  # fmt: skip
            self._thread.start()

    def _commit(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        try:
            self.output.commit(offsets, group_metadata)
        except BaseException as exc:  # raised to the caller by land()
            self._failure = exc

    @property
    def committing(self) -> bool:
        """Whether a commit is running in the background now."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def held(self) -> int:
        """How many messages wait for the next transaction (sent while a commit was in
        flight, or after one failed)."""
        with self._lock:
            return len(self._held)

    def land(self) -> None:
        """Wait for the commit in flight; then send the held messages into the next
        transaction.

        Raises
        ------
        BaseException
            The commit's failure (:class:`~connectors.kafka.transactions.TransactionFailed`,
            mostly): its transaction is as the wrapped output left it, :meth:`retry` commits
            it again; the held messages wait for that.
        """
        thread = self._thread
        if thread is not None:
            started = time.perf_counter()
            thread.join()
            self.waited_s += time.perf_counter() - started
            self._thread = None
        failure = self._failure
        if failure is not None:
            raise failure
        self._release()

    def _release(self) -> None:
        with self._lock:
            held, self._held = self._held, []
            try:
                for message in held:
                    self._send(*message)
            finally:
                self._holding = False

    def retry(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        """Commit again the transaction whose commit failed (the wrapped output's
        :meth:`retry`), then send the held messages into the next one."""
        self.output.retry(offsets, group_metadata)
        self._failure = None
        self._release()

    def abort(self) -> None:
        """Drop the open transaction and what is held (after the commit in flight ended)."""
        self._join()
        with self._lock:
            self._held, self._holding, self._failure = [], False, None
        self.output.abort()

    def close(self) -> None:
        """Wait for the commit in flight to end, drop what is held (never committed), and
        close the wrapped output (which aborts what it has uncommitted)."""
        self._join()
        with self._lock:
            if self._held:
                logger.info("%d messages held for the next transaction dropped at close",
                            len(self._held))  # fmt: skip
            self._held, self._holding = [], False
        self.output.close()

    def _join(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.output!r})"
