"""Sinks writing lines to files or stdout."""

from __future__ import annotations

import logging
import os
import stat
import sys
from typing import BinaryIO

from connectors.base import Closing, Sink
from connectors.errors import ConnectorError

__all__ = ["FileSink", "open_sink"]

logger = logging.getLogger(__name__)


class FileSink(Closing, Sink):
    """Append lines to a file, or write them to stdout for ``"-"``.

    Writes are buffered; :meth:`flush` pushes the buffer to the operating
    system and, for regular files, calls ``os.fsync`` so the data survives a
    crash. Stdout, pipes and other non-regular files are only flushed.

    Parameters
    ----------
    path
        File to append to (created if missing), or ``"-"`` for
        ``sys.stdout.buffer`` (which :meth:`close` flushes but never closes).
    buffer_size
        Size of the write buffer for files, in bytes.

    Raises
    ------
    ConnectorError
        If the file cannot be opened or stdout is unavailable.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name, "out.txt")
    >>> with FileSink(str(path)) as sink:
    ...     sink.write(b'{"y": 1}')
    ...     sink.flush()
    >>> path.read_bytes()
    b'{"y": 1}\\n'
    >>> tmp.cleanup()
    """

    def __init__(self, path: str, *, buffer_size: int = 1 << 16) -> None:
        self.path = path
        self._closed = False
        file: BinaryIO
        if path == "-":
            stdout = getattr(sys.stdout, "buffer", None)
            if stdout is None:
                raise ConnectorError("stdout is not available as a binary stream")
            file = stdout
            self._owned = False
            self._fsync = False
        else:
            try:
                file = open(path, "ab", buffering=buffer_size)  # noqa: SIM115 - owned by the sink
            except OSError as exc:
                raise ConnectorError(f"cannot open {path!r} for writing: {exc}") from exc
            self._owned = True
            try:
                self._fsync = stat.S_ISREG(os.fstat(file.fileno()).st_mode)
            except OSError as exc:
                file.close()
                raise ConnectorError(f"cannot stat {path!r}: {exc}") from exc
        self._file = file
        self._write = file.write
        logger.debug("opened file sink %r", path)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def write(self, line: bytes) -> None:
        """Buffer one line; the newline is added here.

        Raises
        ------
        ConnectorError
            If the sink is closed, ``line`` is not bytes-like, or the write
            fails (disk full, broken pipe...).
        """
        if self._closed:
            raise ConnectorError(f"write to closed sink {self.path!r}")
        try:
            self._write(line)
            self._write(b"\n")
        except TypeError as exc:
            raise ConnectorError(f"line must be bytes, got {type(line).__name__}") from exc
        except (OSError, ValueError) as exc:
            raise ConnectorError(f"writing to {self.path!r} failed: {exc}") from exc

    def flush(self) -> None:
        """Flush the buffer and, for regular files, ``os.fsync`` the file.

        Raises
        ------
        ConnectorError
            If the sink is closed or flushing / syncing fails.
        """
        if self._closed:
            raise ConnectorError(f"flush of closed sink {self.path!r}")
        try:
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except (OSError, ValueError) as exc:
            raise ConnectorError(f"flushing {self.path!r} failed: {exc}") from exc

    def close(self) -> None:
        """Flush (with fsync) and close the file; stdout is only flushed.

        Calling it again is harmless.

        Raises
        ------
        ConnectorError
            If the final flush fails; the file is closed anyway.
        """
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._owned:
                try:
                    self._file.close()
                except OSError as exc:
                    logger.debug("closing %r failed: %s", self.path, exc)
            logger.debug("closed file sink %r", self.path)

    def __repr__(self) -> str:
        return f"FileSink(path={self.path!r})"


def open_sink(path: str) -> Sink:
    """Open the sink for a destination string.

    Parameters
    ----------
    path
        ``"-"`` for stdout, otherwise a file path (appended to).

    Returns
    -------
    Sink
        A :class:`FileSink` for now; other schemes (Kafka) will be
        dispatched here later.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "predictions.jsonl")
    >>> sink = open_sink(path)
    >>> isinstance(sink, FileSink), sink.path == path
    (True, True)
    >>> sink.close(); tmp.cleanup()
    """
    return FileSink(path)
