"""kafka-python's close race, told in one debug line instead of an error with a traceback.

kafka-python 3.0.12 closes a connection's socket from the thread that calls ``close()`` while
its IO loop thread may be between a read task's step and the registration of that task's next
wait. The task then registers a socket that is already closed (file descriptor -1); the selector
raises ``ValueError: Invalid file descriptor: -1`` and the loop logs it on ``kafka.net.selector``
at ERROR level, with a traceback ("Unhandled exception in task ..."). Nothing is lost: the
transport was closing, the task ends, and the client's close completes ("IO loop exited
cleanly"). Seen once in the broker suite's soak at a worker's exit (session 24, run 7).

:func:`quiet_close_race` puts a filter on that logger which turns exactly that record (that
message and that exception) into one DEBUG line without the traceback; every other record of
the library passes untouched. The filter changes no level and adds no handler: logging is still
configured by the command line only.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["CLOSE_RACE_LOGGER", "CloseRaceFilter", "quiet_close_race"]

CLOSE_RACE_LOGGER = "kafka.net.selector"
_MESSAGE = "Unhandled exception in task"
_CLOSED_SOCKET = "Invalid file descriptor: -1"
_install_lock = threading.Lock()


class CloseRaceFilter(logging.Filter):
    """Demote kafka-python's "read task registered a closed socket" error to one DEBUG line.

    Examples
    --------
    >>> import logging, socket, selectors
    >>> closed = socket.socket()
    >>> closed.close()
    >>> try:
    ...     selectors.DefaultSelector().register(closed, selectors.EVENT_READ)
    ... except ValueError as exc:
    ...     error = exc
    >>> record = logging.LogRecord(CLOSE_RACE_LOGGER, logging.ERROR, __file__, 1,
    ...     "Unhandled exception in task %s:", ("<Task _read_from_sock>",),
    ...     (type(error), error, None))
    >>> CloseRaceFilter().filter(record)  # the logger is not enabled for DEBUG: dropped
    False
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not (
            isinstance(exc, ValueError)
            and str(exc) == _CLOSED_SOCKET
            and isinstance(record.msg, str)
            and record.msg.startswith(_MESSAGE)
        ):
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        task = record.getMessage()[len(_MESSAGE):].strip(" :")
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        record.msg = (
            "%s registered a socket its connection had closed (kafka-python's close race:"
            " harmless)"
        )
        record.args = (task or "a task",)
        record.exc_info, record.exc_text = None, None
        return True


def quiet_close_race() -> None:
    """Install :class:`CloseRaceFilter` on ``kafka.net.selector`` (once: idempotent).

    Examples
    --------
    >>> quiet_close_race(); quiet_close_race()
    >>> sum(isinstance(f, CloseRaceFilter) for f in logging.getLogger(CLOSE_RACE_LOGGER).filters)
    1
    """
    target = logging.getLogger(CLOSE_RACE_LOGGER)
    with _install_lock:
        if not any(isinstance(f, CloseRaceFilter) for f in target.filters):
            target.addFilter(CloseRaceFilter())
