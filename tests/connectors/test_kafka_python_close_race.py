"""kafka-python's close race (a read task registering a socket its connection had closed) is
one DEBUG line, not an ERROR with a traceback; every other record of the library is untouched.

The error is made as kafka-python makes it: a selector asked to watch a closed socket raises
``ValueError: Invalid file descriptor: -1``, logged with ``log.exception`` on
``kafka.net.selector`` (kafka/net/selector.py, ``_poll_once``), here through a real handler.
"""

from __future__ import annotations

import io
import logging
import selectors
import socket
from collections.abc import Iterator

import pytest

from connectors.kafka.kafka_python_logs import CLOSE_RACE_LOGGER, CloseRaceFilter, quiet_close_race

_NOWHERE = "127.0.0.1:9"  # nothing listens there; nothing here connects


def _closed_socket_error() -> ValueError:
    closed = socket.socket()
    closed.close()
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(closed, selectors.EVENT_READ)
        except ValueError as exc:
            return exc
    raise AssertionError("registering a closed socket raised nothing")


@pytest.fixture
def library_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """kafka-python's selector logger with a handler of its own; its filters restored after."""
    logger = logging.getLogger(CLOSE_RACE_LOGGER)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    saved = (list(logger.filters), logger.level, logger.propagate)
    logger.filters = [f for f in logger.filters if not isinstance(f, CloseRaceFilter)]
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)
        logger.filters, logger.level, logger.propagate = saved


def _log_race(logger: logging.Logger) -> None:
    try:
        raise _closed_socket_error()
    except ValueError:
        logger.exception("Unhandled exception in task %s:", "<Task _read_from_sock>")


def test_without_the_filter_the_race_is_an_error_with_a_traceback(library_log) -> None:
    logger, stream = library_log
    logger.setLevel(logging.INFO)
    _log_race(logger)
    assert "ERROR: Unhandled exception in task" in stream.getvalue()
    assert "Traceback" in stream.getvalue()


def test_the_race_is_dropped_at_info_and_one_debug_line_at_debug(library_log) -> None:
    logger, stream = library_log
    quiet_close_race()
    logger.setLevel(logging.INFO)
    _log_race(logger)
    assert stream.getvalue() == ""
    logger.setLevel(logging.DEBUG)
    _log_race(logger)
    text = stream.getvalue()
    assert "Traceback" not in text and "ERROR" not in text
    assert text.splitlines() == [
        "DEBUG: <Task _read_from_sock> registered a socket its connection had closed"
        " (kafka-python's close race: harmless)"
    ]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("Unhandled exception in task %s:", ValueError("Invalid file descriptor: 7")),
        ("Unhandled exception in task %s:", OSError("Invalid file descriptor: -1")),
        ("Something else %s", ValueError("Invalid file descriptor: -1")),
    ],
)
def test_every_other_error_of_the_library_passes_untouched(library_log, message, error) -> None:
    logger, stream = library_log
    quiet_close_race()
    logger.setLevel(logging.INFO)
    try:
        raise error
    except Exception:
        logger.exception(message, "<Task>")
    assert "ERROR: " in stream.getvalue() and "Traceback" in stream.getvalue()


def test_the_kafka_python_clients_install_it(library_log) -> None:
    """Opening kafka-python's consumer and producer (``api_version`` given: no connection is
    made) installs the filter; a source opened without it would show the race's traceback."""
    from connectors.kafka.kafka_python import KafkaSource
    from connectors.kafka.kafka_python_producer import KafkaSink

    logger, _ = library_log
    offline = {"api_version": (3, 0)}
    source = KafkaSource(_NOWHERE, ["events"], "learners", client_options=offline)
    source._open()
    source.close()
    assert sum(isinstance(f, CloseRaceFilter) for f in logger.filters) == 1
    logger.filters = [f for f in logger.filters if not isinstance(f, CloseRaceFilter)]
    sink = KafkaSink(_NOWHERE, "predictions", client_options=offline)
    sink._open().close(timeout=1)
    assert sum(isinstance(f, CloseRaceFilter) for f in logger.filters) == 1
