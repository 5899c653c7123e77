"""Shared test set-up: the tests/ folder is importable (helpers: cli_helpers, services, ...),
the markers of what a test needs (:mod:`needs`), one broker for every test process, and the
evidence a failed test leaves behind."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gc  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import evidence  # noqa: E402
import needs  # noqa: E402
import pytest  # noqa: E402
import slow_first  # noqa: E402
from kafka_broker import (  # noqa: E402
    DEFAULT_STATE_DIR,
    BrokerError,
    broker_running,
    start_broker,
    stop_broker,
)

#: fixtures that bring a need with them
_NEED_OF_FIXTURE = {"kafka_bootstrap": "kafka", "secured": "kafka", "own_broker": "kafka"}
#: whether a broker ran (or was given) before this session: then the session leaves it running
_BROKER_BEFORE = pytest.StashKey[bool]()


def _controller(config: pytest.Config) -> bool:
    """The process that is not a pytest-xdist worker (the only one without -n)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    for marker, text in needs.NEEDS.items():
        config.addinivalue_line("markers", f"{marker}: {text}")
    config.addinivalue_line("markers", "slow: takes more than a minute")
    if _controller(config):
        # the broker is started by the first test that needs it (in whichever process) and
        # stopped here, at the very end, when none ran before this session
        config.stash[_BROKER_BEFORE] = bool(
            os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        ) or broker_running()
        os.environ[_SESSION_ENV] = str(os.getpid())  # the xdist workers inherit it


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session with a failed test keeps the broker's logs (``broker-server.log`` and
    ``broker-gc.log`` in the base temp dir, beside the failed tests' worker logs), before its
    state is deleted: a member dropped by the coordinator, a slow request or a long pause of
    the JVM is told only there."""
    config = session.config
    if not _controller(config) or not session.testsfailed:
        return
    state = Path(os.environ.get("KAFKA_STATE_DIR") or DEFAULT_STATE_DIR)
    if not (_LEASES / str(os.getpid())).exists():
        return
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    for name in ("server.log", "gc.log"):
        if (state / name).exists():
            shutil.copyfile(state / name, base / f"broker-{name}")
            print(f"\nthe broker's {name} is kept: {base / f'broker-{name}'}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _controller(config):
        return
    lease = _LEASES / str(os.getpid())
    used = lease.exists()
    lease.unlink(missing_ok=True)
    if not config.stash.get(_BROKER_BEFORE, True) and used and not _other_leases():
        if broker_running():
            # and its state goes too, so the next session starts from an empty broker as
            # CI's fresh clone does: a soak's broker restarted over the 2,500 partitions its
            # earlier runs left took 17 s to show a new topic (a test's 15 s wait failed)
            stop_broker(clean=True)


# Sessions that use the broker hold a lease on it (a file named by the controller's pid): a
# session stops the broker only when it used it and no other live session holds one. Before,
# a session that never touched the broker but started before it stopped it at its end, under
# another session's running tests (two pytest runs in one work tree: "all brokers down").
_SESSION_ENV = "STREAM_PERCEPTRON_TEST_SESSION"
_LEASES = Path(os.environ.get("KAFKA_STATE_DIR") or DEFAULT_STATE_DIR) / "leases"


def _take_lease() -> None:
    session = os.environ.get(_SESSION_ENV)
    if session:
        _LEASES.mkdir(parents=True, exist_ok=True)
        (_LEASES / session).touch()


def _other_leases() -> bool:
    """Whether another live session holds a lease (a dead one's is removed)."""
    alive = False
    for lease in _LEASES.glob("*") if _LEASES.is_dir() else ():
        try:
            pid = int(lease.name)
            os.kill(pid, 0)
        except ProcessLookupError:
            lease.unlink(missing_ok=True)
            continue
        except (ValueError, PermissionError):
            pass
        alive = True
    return alive


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            marker = _NEED_OF_FIXTURE.get(fixture)
            if marker is not None and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
    # The longest tests first, spread over the xdist processes (tests/slow_first.py): one that
    # starts late holds the end of the run alone (the newer-Python test, 155-220 s, once sat in
    # the last eighth of the fourth process's share).
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = slow_first.spread_slow_first(
        items, [item.nodeid for item in items], slow_first.read_slow_tests(), workers
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection made (every test module, its data sets, numpy, River, scikit-learn) lives
    # to the end: frozen, a full collection (Python's own, or the two gc.collect() calls of each
    # River check_bounded_memory_growth) no longer walks it. Those checks took 0.25 s a call in
    # a worker (test_river_contract.py: 10.5 -> 3.1 s of CPU run alone); garbage made by the
    # tests is collected as before.
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _machine_stalls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A sleeper per test process noting when the machine stood still (a failed test's report
    shows those of its time: ``evidence.collect``)."""
    evidence.stall_log = tmp_path_factory.getbasetemp() / f"machine-stalls-{os.getpid()}.txt"
    sleeper = evidence.watch_machine(evidence.stall_log)
    try:
        yield
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.fixture(autouse=True)
def _needs_of_this_test(request: pytest.FixtureRequest) -> Iterator[None]:
    needs.current = frozenset(m.name for m in request.node.iter_markers())
    needs.current_name = request.node.nodeid
    evidence.topics.clear()
    evidence.test_started = time.time()
    try:
        yield
    finally:
        needs.current, needs.current_name = None, ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    if report.failed and call.when == "call":
        for title, text in evidence.collect(item):
            report.sections.append((title, text))
    return report


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """``"127.0.0.1:PORT"`` of a real broker: ``$KAFKA_BOOTSTRAP_SERVERS`` (an existing cluster),
    else the one of ``kafka/kafka-up.sh``, started by the first test process that needs it
    (the script is idempotent and serialised by a lock) and stopped when the session ends.
    Tests share it in parallel: each makes topics and groups of its own (uuid names)."""
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given
    try:
        bootstrap = start_broker()
    except BrokerError as exc:
        pytest.fail(f"cannot start the test broker: {exc}")
    _take_lease()
    return bootstrap


@pytest.fixture(params=("kafka-python", "confluent-kafka"))
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The Kafka client of a Kafka test (``--kafka-client``): each test asking for it runs once
    per client, against the real broker."""
    return request.param
