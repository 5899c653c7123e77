"""The private internals of kafka-python (3.x) the adapter relies on.

Three internals have no public API (each wrapped so that a library change fails loudly, with a
:class:`~connectors.errors.ConnectorError` naming the missing attribute, checked when the
client is created; ``tests/connectors/kafka/test_kafka_client_adapter.py`` checks them
against the installed library):

* the consumer's ``_coordinator.coordinator_unknown()`` (:func:`coordinator_unknown`):
  ``group_metadata().state`` stays ``STABLE`` while the broker is away;
* the consumer's ``_manager.call_soon()`` (:func:`call_soon_threadsafe`): kafka-python 3 calls
  rebalance listeners on its IO loop thread, where blocking consumer calls (``committed``,
  ``seek``, ``end_offsets``...) are refused, so an ``AsyncConsumerRebalanceListener`` awaits
  a helper thread; a ``kafka.future.Future`` completed from that thread must be completed on
  the loop, or its awaiting task is not woken;
* the consumer's ``_coordinator._join_task`` and ``rejoin_needed`` (:func:`keep_join_going`):
  kafka-python 3.0.12 loses a rebalance that a metadata change started (not a rejoin request)
  when a poll's timeout ends before the JoinGroup/SyncGroup round trip does. The next poll asks
  ``need_rejoin()``, which is false by then (the leader took the new metadata snapshot as the
  assignment's), so the join task in flight is never awaited again: its assignment is never
  applied, heartbeats stay off, and the member holds no partition until the broker drops it.
  It is common on a fresh topic: the first join often comes before the consumer's metadata
  lists the topic (an empty assignment), and the rejoin that follows must fit in one poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from connectors.errors import ConnectorError

__all__ = [
    "TESTED_WITH", "call_soon_threadsafe", "coordinator_unknown", "keep_join_going",
    "private_method", "require_internals",
]  # fmt: skip

logger = logging.getLogger(__name__)

TESTED_WITH = "kafka-python 3.0.12"


def private_method(
    client: Any, owner: str, method: str, kind: str = "KafkaConsumer"
) -> Callable[..., Any]:
    """``getattr(getattr(client, owner), method)``, or a ConnectorError saying what changed."""
    bound = getattr(getattr(client, owner, None), method, None)
    if not callable(bound):
        raise ConnectorError(
            f"the installed kafka-python has no {kind}.{owner}.{method}() (relied on since no"
            f" public API does the job; tested with {TESTED_WITH}): see"
            " connectors/kafka/kafka_python.py"
        )
    return bound


def coordinator_unknown(consumer: Any) -> bool:
    """Whether ``consumer``'s group coordinator is unknown or its connection is down (no
    network call).

    Examples
    --------
    >>> class Coordinator:
    ...     def coordinator_unknown(self):
    ...         return False
    >>> class Consumer:
    ...     _coordinator = Coordinator()
    >>> coordinator_unknown(Consumer())
    False
    >>> coordinator_unknown(object())
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: ...KafkaConsumer._coordinator.coordinator_unknown()...
    """
    unknown = private_method(consumer, "_coordinator", "coordinator_unknown")()
    if not isinstance(unknown, bool):
        raise ConnectorError(
            "KafkaConsumer._coordinator.coordinator_unknown() of the installed kafka-python"
            f" returned {unknown!r}, not a bool (tested with {TESTED_WITH})"
        )
    return unknown


def call_soon_threadsafe(consumer: Any, fn: Callable[[], object]) -> None:
    """Schedule ``fn()`` on ``consumer``'s IO loop thread, from any thread; return at once
    (``RuntimeError`` from kafka-python when the loop is closed)."""
    private_method(consumer, "_manager", "call_soon")(fn)


def keep_join_going(consumer: Any) -> None:
    """After a poll of ``consumer``: if a group join is still pending (its task in flight or
    finished but not taken up), mark the rejoin as needed, so that the next poll awaits it (or,
    if it ended, joins again) instead of dropping it (see the module's docstring).

    Examples
    --------
    >>> import threading
    >>> class Coordinator:
    ...     _lock = threading.RLock()
    ...     _join_task = object()  # a join whose poll timed out
    ...     rejoin_needed = False
    >>> class Consumer:
    ...     _coordinator = Coordinator()
    >>> keep_join_going(Consumer())
    >>> Consumer._coordinator.rejoin_needed
    True
    """
    coordinator = consumer._coordinator
    if coordinator._join_task is not None and not coordinator.rejoin_needed:
        with coordinator._lock:
            if coordinator._join_task is not None and not coordinator.rejoin_needed:
                logger.debug("a group join outlasted the poll: the next poll takes it up")
                coordinator.rejoin_needed = True


def require_internals(consumer: Any) -> None:
    """Check what :func:`coordinator_unknown`, :func:`call_soon_threadsafe` and
    :func:`keep_join_going` rely on."""
    private_method(consumer, "_coordinator", "coordinator_unknown")
    private_method(consumer, "_manager", "call_soon")
    coordinator = consumer._coordinator
    for name in ("_join_task", "rejoin_needed", "_lock"):
        if not hasattr(coordinator, name):
            raise ConnectorError(
                f"the installed kafka-python has no KafkaConsumer._coordinator.{name} (relied on"
                f" to keep a group join a poll's timeout cut short; tested with {TESTED_WITH}):"
                " see connectors/kafka/kafka_python.py"
            )
