"""What the engine asks of a Kafka transactional output and of the source it commits for: the
client-neutral interfaces of shared-model mode (:mod:`connectors.kafka.transactions` holds
what every client's producer does alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from connectors.kafka.common import TopicPartitionKey

__all__ = ["GroupMember", "PartitionCounter", "TransactionalOutput"]


@runtime_checkable
class GroupMember(Protocol):
    """A consumer-group source whose membership a transaction's offsets are committed for."""

    def group_metadata(self) -> Any:
        """The client's snapshot of the group membership (opaque to the caller)."""
        ...


@runtime_checkable
class PartitionCounter(Protocol):
    """A source that can tell the partition counts of the topics it reads."""

    def tell_partition_counts(self, listener: Callable[[dict[str, int]], None]) -> None:
        """Have ``listener`` told each topic's partition count at each assignment, before the
        assigned partitions are taken up."""
        ...


@runtime_checkable
class TransactionalOutput(Protocol):
    """Messages and consumed offsets committed together.

    A transaction is open from the first :meth:`send` after a :meth:`commit` (or the start);
    :meth:`commit` adds the consumer group's offsets to it and commits it; :meth:`abort` drops
    it. A crash leaves it open until a producer of the same transactional id starts (which
    aborts it) or the transaction times out: ``read_committed`` readers never see it.
    """

    def start(self) -> None:
        """Connect and fence a former producer of the same id (aborting its open
        transaction)."""
        ...

    def send(
        self, topic: str, value: bytes | None, key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
    ) -> None: ...  # fmt: skip

    def commit(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None: ...

    def retry(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None: ...

    def abort(self) -> None: ...

    def close(self) -> None: ...
