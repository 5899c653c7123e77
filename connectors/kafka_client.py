"""The only place where the connectors reach into kafka-python's private internals.

kafka-python 3 (written against 3.0.12) has no public API for two things
:class:`~connectors.kafka_source.KafkaSource` needs; each is wrapped here so a
library change fails loudly, with a :class:`~connectors.errors.ConnectorError`
naming the missing attribute, instead of deep inside a rebalance.
``tests/connectors/kafka/test_kafka_client_adapter.py`` checks both against the
installed library.

* :func:`coordinator_unknown`: whether the group coordinator is unknown or
  unreachable. ``KafkaConsumer.group_metadata().state`` stays ``STABLE`` while
  the broker is away, and ``KafkaConsumer.metrics()`` (documented as unstable)
  has no coordinator metric.
* :func:`call_soon_threadsafe`: run a function on kafka-python's IO loop from
  another thread. An ``AsyncConsumerRebalanceListener`` that awaits work done
  in a helper thread needs it: a ``kafka.future.Future`` completed from a
  foreign thread resumes its awaiting task without waking the loop (and not
  thread-safely). A synchronous ``ConsumerRebalanceListener`` is no way out:
  it runs on the IO loop, where blocking consumer calls (``committed``,
  ``commit``, ``end_offsets``...) are refused, and it cannot wait for a helper
  thread making them, since those calls need the loop it would be blocking.

:func:`require_internals` checks both at once, before the consumer is used.

And for :class:`~connectors.kafka_transactions.KafkaTransactions`: the transactional calls
with a time limit. ``KafkaProducer.commit_transaction()`` and its kin wait without one (a
commit caught by a broker restart could hang a worker for good), and a commit that timed out
must be waited for again, never begun again (it may have landed). So the adapter starts them
through ``KafkaProducer._transaction_manager`` (:func:`begin_commit`, :func:`begin_abort`,
:func:`send_offsets_to_transaction`), wakes ``KafkaProducer._sender`` and waits on the
request's result with a limit (:func:`wait_transactional`);
:func:`require_producer_internals` checks them when the producer is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.errors import ConnectorError

__all__ = [
    "begin_abort",
    "begin_commit",
    "call_soon_threadsafe",
    "coordinator_unknown",
    "require_internals",
    "require_producer_internals",
    "send_offsets_to_transaction",
    "wait_transactional",
]

_TESTED_WITH = "kafka-python 3.0.12"


def _private_method(
    client: Any, owner: str, method: str, kind: str = "KafkaConsumer"
) -> Callable[..., Any]:
    """``getattr(getattr(client, owner), method)``, or a ConnectorError saying what changed."""
    holder = getattr(client, owner, None)
    bound = getattr(holder, method, None)
    if holder is None or not callable(bound):
        raise ConnectorError(
            f"the installed kafka-python has no {kind}.{owner}.{method}() (relied on"
            f" since no public API does the job; tested with {_TESTED_WITH}): see"
            " connectors/kafka_client.py"
        )
    return bound


def coordinator_unknown(consumer: Any) -> bool:
    """Whether ``consumer``'s group coordinator is unknown or its connection is down.

    Relies on ``KafkaConsumer._coordinator.coordinator_unknown()``
    (``kafka.coordinator.base.BaseCoordinator``, kafka-python 3.0.12): no
    network call; it marks a disconnected coordinator dead, so kafka-python
    looks it up again. No public equivalent: ``group_metadata().state`` stays
    ``STABLE`` while the broker is away, and ``metrics()`` has no such metric.

    Parameters
    ----------
    consumer
        A ``kafka.KafkaConsumer`` with a ``group_id``.

    Returns
    -------
    bool
        ``True`` while no coordinator is known (e.g. the broker is unreachable).

    Raises
    ------
    ConnectorError
        If kafka-python no longer has the attribute, or it does not return a bool.

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
    unknown = _private_method(consumer, "_coordinator", "coordinator_unknown")()
    if not isinstance(unknown, bool):
        raise ConnectorError(
            "KafkaConsumer._coordinator.coordinator_unknown() of the installed kafka-python"
            f" returned {unknown!r}, not a bool (tested with {_TESTED_WITH})"
        )
    return unknown


def call_soon_threadsafe(consumer: Any, fn: Callable[[], object]) -> None:
    """Schedule ``fn()`` on ``consumer``'s IO loop thread, from any thread; return at once.

    Relies on ``KafkaConsumer._manager.call_soon(fn)``
    (``kafka.net.manager.KafkaConnectionManager``, kafka-python 3.0.12):
    documented there as thread-safe, it queues ``fn`` and wakes the loop. No
    public equivalent: the public consumer calls only run kafka-python's own
    coroutines on the loop.

    Use it to complete a ``kafka.future.Future`` awaited on the loop (by an
    ``AsyncConsumerRebalanceListener``) from a helper thread.

    Parameters
    ----------
    consumer
        A ``kafka.KafkaConsumer`` (not closed).
    fn
        Called without arguments on the IO loop thread; keep it short.

    Raises
    ------
    ConnectorError
        If kafka-python no longer has the attribute.
    RuntimeError
        From kafka-python, if the consumer's IO loop is closed.
    """
    _private_method(consumer, "_manager", "call_soon")(fn)


def require_internals(consumer: Any) -> None:
    """Check that ``consumer`` has what :func:`coordinator_unknown` and
    :func:`call_soon_threadsafe` rely on, without calling it.

    Called right after a consumer is created, so a kafka-python change is
    reported there rather than inside a rebalance (where an error would leave
    the consumer's IO loop waiting).

    Raises
    ------
    ConnectorError
        Naming the first missing attribute.
    """
    _private_method(consumer, "_coordinator", "coordinator_unknown")
    _private_method(consumer, "_manager", "call_soon")


def _producer_part(producer: Any, owner: str, method: str) -> Callable[..., Any]:
    return _private_method(producer, owner, method, "KafkaProducer")


def require_producer_internals(producer: Any) -> None:
    """Check what the transactional calls below rely on, without calling it.

    Raises
    ------
    ConnectorError
        Naming the first missing attribute.
    """
    for method in ("begin_commit", "begin_abort", "send_offsets_to_transaction"):
        _producer_part(producer, "_transaction_manager", method)
    _producer_part(producer, "_sender", "wakeup")


def begin_commit(producer: Any) -> Any:
    """Start committing the open transaction: ``_transaction_manager.begin_commit()`` (what
    ``KafkaProducer.commit_transaction`` does before it waits without a limit); the request's
    result, for :func:`wait_transactional`."""
    return _producer_part(producer, "_transaction_manager", "begin_commit")()


def begin_abort(producer: Any) -> Any:
    """Start aborting the open transaction; the request's result."""
    return _producer_part(producer, "_transaction_manager", "begin_abort")()


def send_offsets_to_transaction(producer: Any, offsets: Any, group_metadata: Any) -> Any:
    """Start adding consumed offsets to the open transaction; the request's result."""
    return _producer_part(producer, "_transaction_manager", "send_offsets_to_transaction")(
        offsets, group_metadata
    )


def wait_transactional(producer: Any, result: Any, timeout_s: float, what: str) -> None:
    """Wake the producer's sender and wait up to ``timeout_s`` for ``result`` (a
    ``TransactionalRequestResult``, kafka-python 3.0.12: ``wait(timeout_ms=)`` returns
    whether it completed and raises its error).

    Raises
    ------
    kafka.errors.KafkaTimeoutError
        If it did not complete in time (the request stays pending: waiting again on the same
        ``result`` picks it up).
    kafka.errors.KafkaError
        The request's own error.
    ConnectorError
        If kafka-python changed what this relies on.
    """
    from kafka.errors import KafkaTimeoutError

    _producer_part(producer, "_sender", "wakeup")()
    wait = getattr(result, "wait", None)
    if not callable(wait):
        raise ConnectorError(
            f"kafka-python's transactional request result {result!r} has no wait() (tested "
            f"with {_TESTED_WITH}): see connectors/kafka_client.py"
        )
    if not wait(timeout_ms=int(timeout_s * 1000)):
        raise KafkaTimeoutError(f"{what} took more than {timeout_s:g} s")
