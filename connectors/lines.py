"""Line-oriented source for stdin, files and pipes.

:class:`LineSource` turns a binary stream into :class:`~connectors.record.Record`
objects, one per line, without interpreting the bytes.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from connectors.base import BlockSource, Closing
from connectors.errors import ConnectorError
from connectors.line_block import LineBlock
from connectors.record import LINE_TOO_LONG, Position, Record, build_records

__all__ = ["LineSource"]

logger = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"
_LF = 10  # ord(b"\n")
_CR = 13  # ord(b"\r")


class LineSource(Closing, BlockSource):
    """Read a binary stream and yield its lines as records, in batches.

    Parameters
    ----------
    stream
        A binary stream (``sys.stdin.buffer``, a file opened ``"rb"``, a
        pipe, ``io.BytesIO``...).
    name
        Source name used in every :class:`~connectors.record.Position`.
    chunk_size
        Maximum number of bytes requested per read. A batch only holds
        lines completed by one read, so a line is never held back waiting
        for more input.
    max_line_bytes
        Longest accepted line, terminator excluded. A longer line becomes a
        record with ``error="line_too_long"`` whose value is its first
        ``max_line_bytes`` bytes; the rest of the line is skipped while
        reading, so memory stays bounded by a small multiple of
        ``chunk_size + max_line_bytes`` whatever the line length.
    batch_size
        Maximum number of records per batch; the lines of one read are
        split into batches of at most this many records, built one batch at
        a time. Small batches keep few records alive at once, which matters
        for speed: CPython's youngest garbage-collector generation is
        collected after 700 net container allocations and every record is
        two of them (record and position). A batch of 256 is usually
        processed and dropped before that threshold; batches of a whole
        1 MiB read (about 100 000 short lines) make long-lived records that
        trigger costly full collections, measured at less than half the
        throughput. Raise it if per-batch work downstream dominates.
    close_stream
        Whether :meth:`close` also closes ``stream``. Off by default: whoever
        opened the stream closes it. :func:`open_line_source` turns it on
        for the files it opens (never for stdin).

    Notes
    -----
    *Reading.* When the stream has ``read1`` (buffered streams such as
    ``sys.stdin.buffer`` and ``io.BytesIO``), it is used instead of
    ``read``: ``read1(n)`` makes at most one system call and returns what
    is available, so on a pipe or terminal a line is delivered as soon as
    it arrives instead of after ``chunk_size`` bytes or end of input
    (``read(n)`` on a buffered stream blocks until ``n`` bytes are read).
    On regular files ``read1`` still returns full chunks, so throughput is
    unchanged; on pipes chunks are at most the pipe capacity (typically
    64 KiB), which is still large enough to amortise per-batch costs.
    Raw streams (``buffering=0``) are read with ``read``, which already
    makes a single system call.

    *Splitting.* A line ends at ``\\n``; a ``\\r`` directly before the
    ``\\n`` is removed, any other ``\\r`` is kept. End of input terminates
    the last line as a ``\\n`` would, so a missing final newline changes
    nothing (and a trailing ``\\r`` there is removed too). Empty lines are
    records with value ``b""``. A UTF-8 byte order mark is removed from the
    start of the stream only. Offsets are 0-based line numbers counting
    every line.

    Examples
    --------
    >>> src = LineSource(io.BytesIO(b"\\xef\\xbb\\xbfa,b\\r\\n1,2\\r\\n\\n3,4"))
    >>> [(r.value, r.position.offset) for b in src.batches() for r in b]
    [(b'a,b', 0), (b'1,2', 1), (b'', 2), (b'3,4', 3)]
    >>> with LineSource(io.BytesIO(b"12345\\nok\\n"), max_line_bytes=3) as src:
    ...     [(r.value, r.error) for b in src.batches() for r in b]
    [(b'123', 'line_too_long'), (b'ok', None)]
    """

    def __init__(
        self,
        stream: BinaryIO,
        name: str = "stdin",
        *,
        chunk_size: int = 1 << 20,
        max_line_bytes: int = 1 << 20,
        batch_size: int = 256,
        close_stream: bool = False,
    ) -> None:
        for label, value in (
            ("chunk_size", chunk_size),
            ("max_line_bytes", max_line_bytes),
            ("batch_size", batch_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConnectorError(f"{label} must be a positive int, got {value!r}")
        self.name = name
        self._stream = stream
        self._chunk_size = chunk_size
        self._read_size = chunk_size
        self._max_line_bytes = max_line_bytes
        self._batch_size = batch_size
        self._close_stream = close_stream
        # read1 (one system call) where the stream has it (buffered files, stdin), else read
        self._read: Callable[[int], bytes | None] = getattr(stream, "read1", None) or stream.read
        self._started = False
        self._closed = False

    @property
    def chunk_size(self) -> int:
        """Maximum number of bytes requested per read."""
        return self._chunk_size

    @property
    def max_line_bytes(self) -> int:
        """Longest accepted line in bytes, terminator excluded."""
        return self._max_line_bytes

    @property
    def batch_size(self) -> int:
        """Maximum number of records per batch."""
        return self._batch_size

    def batches(self) -> Iterator[list[Record]]:
        """Return an iterator over batches of records, in stream order.

        Returns
        -------
        Iterator of list of Record
            Each list holds at most ``batch_size`` lines, all completed by
            the same read, and is never empty. Empty input yields no batch.

        Raises
        ------
        ConnectorError
            If called more than once or after :meth:`close`; while
            iterating, if the stream cannot be read or is not binary.
        """
        if self._closed:
            raise ConnectorError(f"source {self.name!r} is closed")
        if self._started:
            raise ConnectorError(f"batches() of source {self.name!r} can be iterated only once")
        self._started = True
        return self._iter_batches(blocks=False)

    def blocks(self) -> Iterator[LineBlock | list[Record]]:
        """Like :meth:`batches`, but the complete lines of a read come as one :class:`LineBlock`.

        For a consumer that takes many lines at once (a vectorised parser): no record is made
        per line. A block holds all the lines a read completed; the pieces a block cannot
        hold -- an over-long line, a last line without a newline -- come as record batches,
        in stream order. Offsets and values are those :meth:`batches` gives.

        Examples
        --------
        >>> src = LineSource(io.BytesIO(b"a\\r\\nb\\nc"))
        >>> block, last = src.blocks()
        >>> block, block.data, [(r.value, r.position.offset) for r in last]
        (LineBlock(stdin@0, 2 lines, 4 bytes), b'a\\nb\\n', [(b'c', 2)])

        Raises
        ------
        ConnectorError
            As :meth:`batches`.
        """
        if self._closed:
            raise ConnectorError(f"source {self.name!r} is closed")
        if self._started:
            raise ConnectorError(f"blocks() of source {self.name!r} can be iterated only once")
        self._started = True
        # Reads of at most the line limit: then each line a read completes is within the limit,
        # but maybe the first (the rest of the previous read's line), which is measured.
        self._read_size = min(self._chunk_size, self._max_line_bytes)
        return self._iter_batches(blocks=True)

    def close(self) -> None:
        """Stop iteration at the next batch and close an owned stream.

        Calling it more than once is harmless.
        """
        if self._closed:
            return
        self._closed = True
        if self._close_stream:
            try:
                self._stream.close()
            except OSError as exc:
                raise ConnectorError(f"closing {self.name!r} failed: {exc}") from exc
        logger.debug("closed line source %r", self.name)

    def __repr__(self) -> str:
        return f"LineSource(name={self.name!r})"

    # -- internals ----------------------------------------------------------

    def _read_chunk(self) -> bytes:
        """Read up to ``chunk_size`` bytes; ``b""`` means end of input."""
        try:
            chunk = self._read(self._read_size)
        except io.UnsupportedOperation as exc:
            # io.BufferedIOBase subclasses may inherit a read1 that raises.
            if self._read == self._stream.read:
                raise ConnectorError(f"cannot read {self.name!r}: {exc}") from exc
            self._read = self._stream.read
            return self._read_chunk()
        except (OSError, ValueError) as exc:
            raise ConnectorError(f"reading {self.name!r} failed: {exc}") from exc
        if type(chunk) is not bytes:
            if isinstance(chunk, (bytearray, memoryview)):
                return bytes(chunk)
            if chunk is None:
                raise ConnectorError(
                    f"{self.name!r} is non-blocking; a blocking stream is required"
                )
            raise ConnectorError(
                f"{self.name!r} must be a binary stream, read() returned {type(chunk).__name__}"
            )
        return chunk

    def _chunks(self) -> Iterator[bytes]:
        """Yield non-empty chunks, with a leading byte order mark removed."""
        head = b""
        # Read until the head can no longer be the start of a BOM: usually a
        # single read, at most three (for chunk_size < 3).
        while len(head) < len(_BOM) and _BOM.startswith(head) and not self._closed:
            chunk = self._read_chunk()
            if not chunk:
                break
            head += chunk
        if head.startswith(_BOM):
            head = head[len(_BOM) :]
        if head:
            yield head
        while not self._closed:
            chunk = self._read_chunk()
            if not chunk:
                return
            yield chunk

    def _too_long(self, value: bytes, offset: int) -> Record:
        logger.debug(
            "line %d of %r is longer than %d bytes; truncated",
            offset,
            self.name,
            self._max_line_bytes,
        )
        return Record(
            value[: self._max_line_bytes], Position(self.name, offset), error=LINE_TOO_LONG
        )

    def _iter_batches(self, blocks: bool) -> Iterator[Any]:
        name = self.name
        limit = self._max_line_bytes
        size = self._batch_size
        offset = 0  # line number of the next record
        parts: list[bytes] = []  # non-empty pieces of the unterminated line
        pending = 0  # total length of parts, at most limit + 1
        discarding = False  # skipping the rest of an over-long line
        for chunk in self._chunks():
            if discarding:
                cut = chunk.find(b"\n")
                if cut < 0:
                    continue
                discarding = False
                chunk = chunk[cut + 1 :]
                if not chunk:
                    continue
            # A "\r" that ended the previous chunk pairs with a leading "\n".
            strip_cr = bool(parts) and chunk[0] == _LF and parts[-1][-1] == _CR
            if b"\r" in chunk:
                chunk = chunk.replace(b"\r\n", b"\n")
            cut = chunk.rfind(b"\n")
            if cut < 0:  # no terminator: the chunk continues the line
                parts.append(chunk)
                pending += len(chunk)
                # One more byte than the limit may be a "\r" of a "\r\n".
                if pending > limit + 1:
                    batch = [self._too_long(b"".join(parts), offset)]
                    offset += 1
                    parts = []
                    pending = 0
                    discarding = True
                    yield batch
                continue
            tail = chunk[cut + 1 :]
            if parts and strip_cr:
                parts[-1] = parts[-1][:-1]
            # no line of the block can be too long: the first is measured, the others lie in
            # chunk[first + 1 : cut], no longer than a read (the limit, see blocks())
            first = chunk.find(b"\n") if blocks else -1
            if blocks and pending + first <= limit and cut - first - 1 <= limit:
                if self._closed:
                    return
                if parts:  # one copy: the pieces and the chunk's lines joined from a view
                    data = b"".join((*parts, memoryview(chunk)[: cut + 1]))
                else:
                    data = chunk if cut + 1 == len(chunk) else chunk[: cut + 1]
                block = LineBlock(data, name, offset)  # its consumer may count the lines
                yield block
                offset += block.count
            else:
                lines = chunk[:cut].split(b"\n")
                # Lines fully inside a chunk no longer than the limit are short.
                check = pending + cut > limit
                if parts:
                    parts.append(lines[0])
                    lines[0] = b"".join(parts)
                n = len(lines)
                for lo in range(0, n, size):
                    if self._closed:
                        return
                    part = lines if n <= size else lines[lo : lo + size]
                    batch = build_records(part, name, offset)
                    if check:
                        for i, value in enumerate(part):
                            if len(value) > limit:
                                batch[i] = self._too_long(value, offset + i)
                    offset += len(part)
                    yield batch
            pending = len(tail)
            parts = [tail] if pending else []
            if pending > limit + 1:
                batch = [self._too_long(tail, offset)]
                offset += 1
                parts = []
                pending = 0
                discarding = True
                yield batch
        if parts and not self._closed:  # last line without final newline
            value = b"".join(parts)
            if value[-1] == _CR:
                value = value[:-1]
            if len(value) > limit:
                yield [self._too_long(value, offset)]
            else:
                yield [Record(value, Position(name, offset))]
