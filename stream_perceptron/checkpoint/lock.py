"""One writer per checkpoint: an exclusive ``flock`` on ``<checkpoint>.lock``, held for the run.

Two runs on one checkpoint would each cut the other's outputs back and the last to save would
erase the other's learning. The lock file sits beside the checkpoint's real file (symlinks
followed, so every spelling of it shares one lock) and names its holder (pid and host), so a
second run can say who has it. The kernel drops the lock when the holder exits, however it
exits; the file itself is left in place (removing it would let a third run lock a new file
while the second still holds the old one).
"""

from __future__ import annotations

import fcntl
import json
import os
import time

from stream_perceptron.errors import StreamPerceptronError

__all__ = ["CheckpointLock", "CheckpointLockedError", "lock_path"]


class CheckpointLockedError(StreamPerceptronError):
    """Another process holds the checkpoint's lock (exit 2: the user must stop the other run)."""

    exit_code = 2


def lock_path(checkpoint: str) -> str:
    """``<real path of the checkpoint>.lock``."""
    return os.path.realpath(checkpoint) + ".lock"


class CheckpointLock:
    """The exclusive lock on a checkpoint, taken at once or refused (never waited for).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.json")
    >>> with CheckpointLock(path):
    ...     CheckpointLock(path).acquire()
    Traceback (most recent call last):
    ...
    stream_perceptron.checkpoint.lock.CheckpointLockedError: ...
    >>> CheckpointLock(path).acquire().release()

    """

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self.path = lock_path(checkpoint)
        self._fd: int | None = None

    def acquire(self) -> CheckpointLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise CheckpointLockedError(
                f"the checkpoint {self.checkpoint} is in use by another run ({holder}; lock "
                f"file {self.path}): one run per checkpoint"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        import socket  # here: a run without a checkpoint starts without it

        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode() + b"\n", 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    def __enter__(self) -> CheckpointLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0))
        return f"pid {int(holder['pid'])} on {str(holder['host'])[:255]!r}"
    except (OSError, ValueError, TypeError, KeyError):
        return "holder unknown"
