"""The compacted model topic of shared-model mode: created when missing, read to its end.

:class:`ModelLog` is the client-neutral interface; :class:`ModelLogBase` holds what every
client does alike (reading to the end past open transactions); each client adapter
(:mod:`connectors.kafka.kafka_python`, :mod:`connectors.kafka.librdkafka`) adds its calls.
The topic has one partition (every worker reads all of it, in one order) and
``cleanup.policy=compact`` (only the latest record of each key is kept).
Reads are ``read_committed``: a worker's records count once its transaction is committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from connectors.errors import ConnectorError
from connectors.kafka.common import check_topic

__all__ = [
    "LogRecord",
    "ModelLog",
    "ModelLogBase",
    "ModelTopicError",
    "TOPIC_CONFIG",
    "check_model_topic",
    "missing_model_topic",
]

logger = logging.getLogger(__name__)

#: how long a worker waits for the metadata of a model topic another worker just created
CREATION_WAIT_S = 15.0

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "max.message.bytes": str(16 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
    # roll segments every 10 min: only closed segments are compacted, and a worker that joins
    # reads the whole log (without it, up to 1 GiB or 7 days of every worker's commits)
    "segment.ms": "600000",
}


class LogRecord(tuple[bytes | None, bytes | None]):
    """A record read from the log: the pair ``(key, value)``, with its ``headers`` (a list of
    ``(name, bytes)``, or ``None``) as an attribute.

    Examples
    --------
    >>> record = LogRecord(b"k", b"v", [("h", b"1")])
    >>> record == (b"k", b"v"), record.headers
    (True, [('h', b'1')])
    >>> key, value = record
    """

    headers: list[tuple[str, bytes]] | None

    def __new__(
        cls, key: bytes | None, value: bytes | None, headers: Any = None
    ) -> LogRecord:
        record = super().__new__(cls, (key, value))
        record.headers = [(str(k), v) for k, v in headers] if headers else None
        return record


@runtime_checkable
class ModelLog(Protocol):
    """A keyed log every worker reads to its end."""

    def ensure(self, create: bool = True) -> None:
        """Check the topic (one partition, compacted only; else :class:`ModelTopicError`);
        create it when it does not exist and ``create``, else raise ModelTopicError."""
        ...

    def read_new(self, timeout_s: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
        """``(key, value)`` of the committed records after the last ones read, up to the end
        the log had when called (the first call reads from the start)."""
        ...

    def close(self) -> None: ...


class ModelTopicError(ConnectorError):
    """The model topic is missing, or not one partition compacted only: a model there could
    be lost to retention or read in parts."""


def check_model_topic(topic: str, partitions: int, policy: str) -> None:
    """Refuse a model topic of other than one partition, or not ``cleanup.policy=compact``.

    Examples
    --------
    >>> check_model_topic("model", 1, "compact")
    >>> check_model_topic("model", 3, "compact")
    Traceback (most recent call last):
    ...
    connectors.kafka.model_log.ModelTopicError: the model topic 'model' has 3 partitions ...
    """
    problems = []
    if partitions != 1:
        problems.append(f"{partitions} partitions (every worker must read one log, in one order)")
    if {p.strip() for p in policy.split(",")} != {"compact"}:
        problems.append(
            f"cleanup.policy={policy} (a model topic must be compacted only: retention would "
            "delete the mixture)"
        )
    if problems:
        raise ModelTopicError(
            f"the model topic {topic!r} has {' and '.join(problems)}; use a new topic name, or "
            f"recreate it (stream-perceptron creates it with {TOPIC_CONFIG})"
        )


def missing_model_topic(topic: str) -> ModelTopicError:
    return ModelTopicError(f"there is no model topic {topic!r} (check its name and the cluster)")


class ModelLogBase:
    """What every client's :class:`ModelLog` does alike: read the one partition to its last
    stable offset, past transactions still open (up to ``stable_wait_s``).

    A client implements :meth:`close`, the admin hooks of :meth:`ensure` (``_admin``,
    ``_topics``, ``_create_topic``, ``_partitions``, ``_cleanup_policy``, ``_close_admin``)
    and the reader's :meth:`_stable_end`
    (the ``read_committed`` end, opening the reader ``_consumer`` when needed), :meth:`_high`
    (the high watermark, ``None`` unknown: asked of the broker by a ``read_uncommitted``
    handle ``_latest``, since what a reader's fetches last saw is stale once it is at its end),
    :meth:`_position` and :meth:`_poll`; its errors (:meth:`_client_errors`) become
    ConnectorErrors.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        *,
        client_options: dict[str, Any] | None = None,
        partition: int = 0,
    ) -> None:
        self.topic = check_topic(topic)
        #: the partition read (a model topic has one; a join changelog one a task)
        self.partition = partition
        #: the partition count :meth:`ensure` creates the topic with
        self.create_partitions = 1
        #: what the topic is, in messages
        self.kind = "the model topic"
        self._servers = bootstrap_servers
        self._options = dict(client_options or {})
        self.stable_wait_s = 25.0  # a dead worker's transaction times out after 10 s
        self._consumer: Any = None
        self._latest: Any = None
        self._carry: list[tuple[bytes | None, bytes | None]] = []  # read by a failed call
        self._next = 0  # the offset after the last record read: a reopened reader starts there

    def ensure(self, create: bool = True) -> None:
        """Check the topic (one partition, compacted only; else :class:`ModelTopicError`);
        create it when it does not exist and ``create``, else raise ModelTopicError."""
        admin = self._admin()
        try:
            if self.topic not in self._topics(admin):
                if not create:
                    raise missing_model_topic(self.topic)
                if self._create_topic(admin):
                    logger.warning("created the model topic %r (compacted, 1 partition)",
                                   self.topic)  # fmt: skip
                    # the broker answers the creation before its metadata holds the topic: a
                    # read then failed with "Unknown partition" (a soak, beside two CPU hogs)
                    self._wait_for_creation(lambda: self._partitions(admin))
                    return
            partitions = self._wait_for_creation(lambda: self._partitions(admin))
            check_model_topic(self.topic, partitions, self._cleanup_policy(admin))
        except (KeyError, TypeError, ValueError) + self._client_errors() as exc:
            raise ConnectorError(f"cannot check the model topic {self.topic!r}: {exc!r}") from exc
        finally:
            self._close_admin(admin)

    def ensure_changelog(self, events_topic: str) -> None:
        """A join changelog topic (shared-model mode's pending events and outcomes): created
        compacted with as many partitions as ``events_topic`` when missing, else checked to
        have them (it is co-partitioned with the events) and to be compacted only; a
        :class:`ModelTopicError` says what is wrong."""
        self.kind = "the join changelog topic"
        admin = self._admin()
        try:
            if events_topic not in self._topics(admin):
                raise ModelTopicError(f"there is no events topic {events_topic!r} (check its "
                                      "name and the cluster)")  # fmt: skip
            partitions = self._wait_for_creation(lambda: self._partitions(admin, events_topic))
            self.create_partitions = partitions
            if self.topic not in self._topics(admin) and self._create_topic(admin):
                logger.warning("created the join changelog topic %r (compacted, %d partitions)",
                               self.topic, partitions)  # fmt: skip
                self._wait_for_creation(lambda: self._partitions(admin))  # as ensure's
                return
            found = self._wait_for_creation(lambda: self._partitions(admin))
            policy = self._cleanup_policy(admin)
        except (KeyError, TypeError, ValueError) + self._client_errors() as exc:
            raise ConnectorError(f"cannot check the topic {self.topic!r}: {exc!r}") from exc
        finally:
            self._close_admin(admin)
        if found != partitions or {p.strip() for p in policy.split(",")} != {"compact"}:
            raise ModelTopicError(
                f"the join changelog topic {self.topic!r} has {found} partitions and "
                f"cleanup.policy={policy}: it must have the events topic's {partitions} and be "
                "compacted only; give another --join-changelog-topic, or delete it (it is "
                "created when missing)"
            )

    def _wait_for_creation(
        self, partitions: Callable[[], int | None], timeout_s: float = CREATION_WAIT_S
    ) -> int:
        """The topic's partition count, once ``partitions()`` knows it: a topic another
        worker has just created can be missing from the metadata, or partitionless, for a
        moment (workers that start together race to create it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                known = partitions()
            except LookupError:
                known = None
            if known:
                return int(known)
            if time.monotonic() > deadline:
                raise ConnectorError(
                    f"{self.kind} {self.topic!r} exists but its metadata did not show "
                    f"within {timeout_s:g} s"
                )
            time.sleep(0.2)

    def read_new(self, timeout_s: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
        """Read to the end. A transaction still open on the topic (another worker's commit in
        progress; a worker that died in the middle of one, until its restart or the
        transaction timeout aborts it) hides what was committed after it: the read waits,
        up to ``stable_wait_s``, for the transactions open when it began to end, so it
        holds every record committed before the call (not for a moment with none open: with
        the group's commits overlapping there may be none). What a call read before it failed
        is returned by the next call, first (nothing is skipped); a failed call closes the
        reader, and the next one opens a new one where it stopped (a client whose view of the
        partition a broker restart left stale recovers)."""
        deadline = time.monotonic() + timeout_s
        stable_by = time.monotonic() + self.stable_wait_s
        out, self._carry = self._carry, []
        target: int | None = None  # the log's end when the read began (open transactions in)
        with self._keeping(out):
            while True:
                # read_committed: the end is the last stable offset (open transactions excluded)
                end = self._stable_end()
                while self._position() < end:
                    if time.monotonic() > deadline:
                        self._carry = out
                        raise ConnectorError(
                            f"reading {self.kind} {self.topic!r} to offset {end} took more "
                            f"than {timeout_s:g} s"
                        )
                    out += self._poll()
                if self.stable_wait_s <= 0:
                    # not waiting for open transactions: where they end is not asked (a
                    # second round trip in every read around a commit and every look of the
                    # leader between its commits)
                    return out
                if target is None:
                    target = self._high()
                if target is None or end >= target:
                    return out
                if time.monotonic() > stable_by:
                    logger.log(
                        logging.WARNING if self.stable_wait_s > 0 else logging.DEBUG,
                        "the model topic %r has a transaction open since offset %d for more "
                        "than %g s: reading what is committed before it",
                        self.topic, end, self.stable_wait_s,
                    )  # fmt: skip
                    return out
                time.sleep(0.1)

    def read_fetched(self) -> list[tuple[bytes | None, bytes | None]]:
        """The committed records after the last ones read that the reader already holds, with
        no request to the broker: a prefix of the log (what :meth:`read_new` reads when not
        waiting for open transactions, ``stable_wait_s`` 0, minus what its fetches have not
        brought in yet). This client has no fetches of its own between calls: it reads as
        :meth:`read_new` with ``stable_wait_s`` 0."""
        wait, self.stable_wait_s = self.stable_wait_s, 0.0
        try:
            return self.read_new()
        finally:
            self.stable_wait_s = wait

    @contextmanager
    def _keeping(self, out: list[tuple[bytes | None, bytes | None]]) -> Iterator[None]:
        """A read that fails keeps what it read (``out``, grown in place) for the next read,
        drops its reader (the next read opens a new one where it stopped) and raises a
        ConnectorError."""
        try:
            yield
        except ConnectorError:
            self._carry = out
            self._reopen()
            raise
        except self._client_errors() as exc:
            self._carry = out
            self._reopen()
            raise ConnectorError(f"reading {self.kind} {self.topic!r} failed: {exc!r}") from exc

    def _reopen(self) -> None:
        """Drop the reader (the next read opens a new one at ``_next``)."""
        try:
            self.close()
        except Exception as exc:  # noqa: BLE001 - any client's error: the reader is dropped
            logger.debug("closing the model-topic reader failed: %r", exc)
        self._consumer = self._latest = None

    def close(self) -> None:
        raise NotImplementedError

    # the topic, through the client's admin client
    def _admin(self) -> Any:
        raise NotImplementedError

    def _topics(self, admin: Any) -> set[str]:
        raise NotImplementedError

    def _create_topic(self, admin: Any) -> bool:
        """Create the topic (one partition, ``TOPIC_CONFIG``, the cluster's replication);
        False when another worker was first."""
        raise NotImplementedError

    def _partitions(self, admin: Any, topic: str | None = None) -> int | None:
        """The partition count of ``topic`` (default: this log's); ``None`` (or
        ``LookupError``) while it is being created."""
        raise NotImplementedError

    def _cleanup_policy(self, admin: Any) -> str:
        raise NotImplementedError

    def _close_admin(self, admin: Any) -> None:
        """Close ``admin`` (nothing to do for a client whose admin goes with its reference)."""

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _stable_end(self) -> int:
        raise NotImplementedError

    def _high(self) -> int | None:
        raise NotImplementedError

    def _position(self) -> int:
        raise NotImplementedError

    def _poll(self) -> list[tuple[bytes | None, bytes | None]]:
        raise NotImplementedError
