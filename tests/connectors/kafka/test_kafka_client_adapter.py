"""The kafka-python adapter's private internals (``connectors.kafka.kafka_python`` and
``connectors.kafka.kafka_python_producer``) against the installed kafka-python (fails when it
changes).

The adapter holds the connectors' only uses of kafka-python private internals; these
tests check that they still exist and still do what the source relies on: on a
consumer that never connects, then in a real group on the test broker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connectors import ConnectorError
from connectors.kafka import kafka_python_internals as kafka_client
from connectors.kafka import kafka_python_producer as producer_client
from connectors.kafka.kafka_python import KafkaModelLog

_NOWHERE = "127.0.0.1:9"  # nothing listens there; nothing here needs to connect


@pytest.fixture
def offline_consumer() -> Iterator[Any]:
    """A real KafkaConsumer that makes no connection (``api_version`` given)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=_NOWHERE,
        group_id="adapter-test",
        api_version=(3, 0),
        enable_auto_commit=False,
    )
    yield consumer
    consumer.close(autocommit=False, timeout_ms=1000)


# -- the installed library ---------------------------------------------------------------------
def test_the_installed_library_has_what_the_adapter_relies_on(offline_consumer: Any) -> None:
    kafka_client.require_internals(offline_consumer)


def test_coordinator_unknown_is_a_bool_and_true_before_any_connection(
    offline_consumer: Any,
) -> None:
    assert kafka_client.coordinator_unknown(offline_consumer) is True


def _run_from_another_thread(consumer: Any, timeout: float = 3) -> tuple[int, float]:
    """Schedule a function from a fresh thread; return the ident of the thread that ran
    it and the delay. The loop is idle, so only a real wake-up runs it quickly."""
    ran = threading.Event()
    ran_in: list[int] = []

    def fn() -> None:
        ran_in.append(threading.get_ident())
        ran.set()

    start = time.monotonic()
    thread = threading.Thread(target=kafka_client.call_soon_threadsafe, args=(consumer, fn))
    thread.start()
    thread.join()
    assert ran.wait(timeout), f"call_soon_threadsafe: fn did not run within {timeout} s"
    return ran_in[0], time.monotonic() - start


def test_call_soon_threadsafe_runs_promptly_on_the_io_thread(offline_consumer: Any) -> None:
    """Each call wakes the idle loop: without a wake-up, fn waits for the loop's next
    timer, seconds later."""
    threads = set()
    for _ in range(3):
        time.sleep(0.8)  # let the IO loop go idle in select()
        thread, delay = _run_from_another_thread(offline_consumer)
        assert delay < 0.5, f"the IO loop was not woken up ({delay:.2f} s)"
        threads.add(thread)
    assert len(threads) == 1, "functions must all run on the one IO loop thread"
    assert threading.get_ident() not in threads


def test_call_soon_threadsafe_returns_without_waiting_for_fn(offline_consumer: Any) -> None:
    release = threading.Event()
    kafka_client.call_soon_threadsafe(offline_consumer, lambda: release.wait(5))
    release.set()  # reached only if the call above did not wait for fn


def test_call_soon_threadsafe_on_a_closed_consumer_raises() -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=_NOWHERE, api_version=(3, 0))
    consumer.close(autocommit=False, timeout_ms=1000)
    with pytest.raises(RuntimeError):
        kafka_client.call_soon_threadsafe(consumer, lambda: None)


def test_in_a_real_group(
    kafka_bootstrap: str, make_topic: Callable[..., str], group_id: str
) -> None:
    """What KafkaSource does: an async rebalance listener awaits a kafka-python Future
    that a helper thread completes through the adapter, after making blocking
    consumer calls; and the coordinator is known once the group is joined."""
    from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
    from kafka.future import Future

    topic = make_topic(2)
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group_id, enable_auto_commit=False
    )
    seen: dict[str, Any] = {}

    class Listener(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: set[Any]) -> None:
            pass

        async def on_partitions_assigned(self, assigned: set[Any]) -> None:
            seen["listener_thread"] = threading.get_ident()
            done = Future()

            def finish() -> None:
                seen["finish_thread"] = threading.get_ident()
                done.success(None)

            def helper() -> None:
                try:  # blocking calls: they need the IO loop, which must keep running
                    seen["committed"] = {
                        tp: consumer.committed(tp, timeout_ms=10_000) for tp in assigned
                    }
                    seen["helper_thread"] = threading.get_ident()
                finally:
                    kafka_client.call_soon_threadsafe(consumer, finish)

            threading.Thread(target=helper, daemon=True).start()
            await done
            seen["assigned"] = sorted(assigned)

    try:
        kafka_client.require_internals(consumer)
        consumer.subscribe(topics=[topic], listener=Listener())
        deadline = time.monotonic() + 60
        # until an assignment holds the partitions: a consumer whose metadata did not list
        # the new topic yet joins with nothing ("No partition metadata for topic", a fresh
        # clone's make test beside a soak), then rebalances once it learns the topic; that
        # rebalance, if longer than a poll, is kept going as KafkaSource keeps it (a soak's
        # run without this spun for 60 s on a join no poll took up again)
        while not seen.get("assigned") and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
            kafka_client.keep_join_going(consumer)
        assert seen.get("assigned"), "no assignment of the partitions within 60 s"
        assert [(tp.topic, tp.partition) for tp in seen["assigned"]] == [(topic, 0), (topic, 1)]
        assert set(seen["committed"].values()) == {None}
        assert seen["finish_thread"] == seen["listener_thread"]  # the IO loop thread
        assert seen["helper_thread"] not in (seen["listener_thread"], threading.get_ident())
        assert kafka_client.coordinator_unknown(consumer) is False
    finally:
        consumer.close(autocommit=False, timeout_ms=5000)


# -- a library that changed ----------------------------------------------------------------------
class _Coordinator:
    def __init__(self, result: object = False) -> None:
        self.result = result
        self._join_task: object = None
        self.rejoin_needed = False
        self._lock = threading.RLock()

    def coordinator_unknown(self) -> object:
        return self.result


class _RenamedCoordinator:
    def is_coordinator_unknown(self) -> bool:
        return False


class _Manager:
    def __init__(self) -> None:
        self.scheduled: list[Callable[[], object]] = []

    def call_soon(self, fn: Callable[[], object]) -> None:
        self.scheduled.append(fn)


class _RenamedManager:
    def call_soon_threadsafe(self, fn: Callable[[], object]) -> None:
        raise AssertionError("not the attribute the adapter relies on")


class _StandIn:
    """A consumer as a future kafka-python might build it."""

    def __init__(self, coordinator: object = None, manager: object = None) -> None:
        if coordinator is not None:
            self._coordinator = coordinator
        if manager is not None:
            self._manager = manager


def test_stand_in_with_the_attributes_works() -> None:
    manager = _Manager()
    stand_in = _StandIn(_Coordinator(True), manager)
    kafka_client.require_internals(stand_in)
    assert kafka_client.coordinator_unknown(stand_in) is True
    kafka_client.call_soon_threadsafe(stand_in, print)
    assert manager.scheduled == [print]
    kafka_client.keep_join_going(stand_in)  # no join pending: nothing to keep
    assert stand_in._coordinator.rejoin_needed is False
    stand_in._coordinator._join_task = object()  # a join a poll's timeout cut short
    kafka_client.keep_join_going(stand_in)
    assert stand_in._coordinator.rejoin_needed is True


@pytest.mark.parametrize("name", ["_join_task", "rejoin_needed", "_lock"])
def test_a_coordinator_without_the_join_state_is_refused(name: str) -> None:
    coordinator = _Coordinator()
    delattr(coordinator, name)
    with pytest.raises(ConnectorError, match=rf"_coordinator\.{name} "):
        kafka_client.require_internals(_StandIn(coordinator, _Manager()))


@pytest.mark.parametrize(
    "coordinator",
    [None, _RenamedCoordinator(), object()],
    ids=["no _coordinator", "method renamed", "no method"],
)
def test_coordinator_unknown_without_the_attribute_raises(coordinator: object) -> None:
    stand_in = _StandIn(coordinator, _Manager())
    with pytest.raises(ConnectorError, match=r"_coordinator\.coordinator_unknown\(\)"):
        kafka_client.coordinator_unknown(stand_in)
    with pytest.raises(ConnectorError, match=r"_coordinator\.coordinator_unknown\(\)"):
        kafka_client.require_internals(stand_in)


def test_coordinator_unknown_returning_something_else_raises() -> None:
    stand_in = _StandIn(_Coordinator(result=None), _Manager())
    with pytest.raises(ConnectorError, match="not a bool"):
        kafka_client.coordinator_unknown(stand_in)


@pytest.mark.parametrize(
    "manager",
    [None, _RenamedManager(), object()],
    ids=["no _manager", "method renamed", "no method"],
)
def test_call_soon_threadsafe_without_the_attribute_raises(manager: object) -> None:
    stand_in = _StandIn(_Coordinator(), manager)
    with pytest.raises(ConnectorError, match=r"_manager\.call_soon\(\)"):
        kafka_client.call_soon_threadsafe(stand_in, lambda: None)
    with pytest.raises(ConnectorError, match=r"_manager\.call_soon\(\)"):
        kafka_client.require_internals(stand_in)


def test_the_source_refuses_a_consumer_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """KafkaSource checks at once, not in the middle of a rebalance."""
    from kafka import KafkaConsumer

    from connectors import KafkaSource

    class ChangedConsumer(KafkaConsumer):
        def __init__(self, **config: Any) -> None:
            super().__init__(**config, api_version=(3, 0))
            del self._manager  # as if kafka-python had renamed it

    monkeypatch.setattr("kafka.consumer.KafkaConsumer", ChangedConsumer)
    source = KafkaSource(_NOWHERE, ["events"], "learners")
    with pytest.raises(ConnectorError, match=r"_manager\.call_soon\(\)"):
        next(iter(source.batches()))
    source.close()


# -- the transactional producer's internals ---------------------------------------------------
def test_the_installed_producer_has_what_the_transactions_rely_on() -> None:
    """A transactional KafkaProducer that makes no connection (``api_version`` given) has
    the transaction manager's begin_commit/begin_abort/send_offsets_to_transaction and the
    sender's wakeup; their results have ``wait(timeout_ms=)`` returning whether they completed
    (a TransactionalRequestResult)."""
    from kafka import KafkaProducer
    from kafka.producer.transaction_manager import TransactionalRequestResult

    producer = KafkaProducer(bootstrap_servers=_NOWHERE, api_version=(3, 0),
                             transactional_id="adapter-test")  # fmt: skip
    try:
        producer_client.require_producer_internals(producer)
        pending = TransactionalRequestResult()
        assert pending.wait(timeout_ms=10) is False  # not completed: False, no exception
        pending.done()
        assert pending.wait(timeout_ms=10) is True
        producer_client.wait_transactional(producer, pending, 0.01, "a finished request")
    finally:
        producer.close(timeout=1)


def test_a_changed_producer_fails_loudly_naming_what_changed() -> None:
    class Producer:
        _sender = None

    with pytest.raises(ConnectorError, match="KafkaProducer._transaction_manager.begin_commit"):
        producer_client.require_producer_internals(Producer())
    with pytest.raises(ConnectorError, match="_transaction_manager.begin_commit"):
        producer_client.begin_commit(Producer())


def test_wait_transactional_times_out_and_keeps_the_request() -> None:
    """A request not done in time raises KafkaTimeoutError; waiting again on the same result
    picks it up once done (what a commit in doubt relies on)."""
    from kafka.errors import KafkaTimeoutError
    from kafka.producer.transaction_manager import TransactionalRequestResult

    class Sender:
        def wakeup(self) -> None:
            pass

    class Producer:
        _sender = Sender()

    pending = TransactionalRequestResult()
    with pytest.raises(KafkaTimeoutError):
        producer_client.wait_transactional(Producer(), pending, 0.01, "committing")
    pending.done()
    producer_client.wait_transactional(Producer(), pending, 0.01, "committing")


def test_a_model_log_read_position_the_client_could_not_learn_is_a_connector_error() -> None:
    """kafka-python's position() answers None when it could not learn the position within its
    timeout (a broker just restarted, or starved): one ConnectorError, not a TypeError (a
    soak met it as a pull-model traceback)."""

    class NoPosition:
        def position(self, tp: Any, timeout_ms: int) -> None:
            return None

    log = KafkaModelLog("127.0.0.1:9", "a-model-topic")
    log._consumer = NoPosition()
    with pytest.raises(ConnectorError, match="no read position within 10 s"):
        log._position()
