"""In-memory source and sink, for tests and examples."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from itertools import islice

from connectors.base import Closing, Sink, Source
from connectors.errors import ConnectorError
from connectors.record import Position, Record, build_records

__all__ = ["MemorySink", "MemorySource"]

logger = logging.getLogger(__name__)


def _as_bytes(value: object, what: str) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ConnectorError(f"{what} must be bytes or str, got {type(value).__name__}")


class MemorySource(Closing, Source):
    """Serve records from values held in memory.

    Each value becomes exactly one record (values are not split at
    newlines); ``str`` values are encoded as UTF-8.

    Parameters
    ----------
    values
        Record values in order; read lazily, so a generator works.
    name
        Source name used in every position; offsets are ``0..n-1``.
    batch_size
        Maximum number of records per batch.
    keys
        Optional record keys, one per value (``None`` allowed).

    Examples
    --------
    >>> src = MemorySource(["a", b"b", "c"], batch_size=2)
    >>> [[r.value for r in batch] for batch in src.batches()]
    [[b'a', b'b'], [b'c']]
    >>> src = MemorySource([b"v"], name="t", keys=["k"])
    >>> [(r.key, str(r.position)) for batch in src.batches() for r in batch]
    [(b'k', 't@0')]
    """

    def __init__(
        self,
        values: Iterable[bytes | str],
        name: str = "memory",
        *,
        batch_size: int = 1000,
        keys: Iterable[bytes | str | None] | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConnectorError(f"batch_size must be a positive int, got {batch_size!r}")
        self.name = name
        self._values = values
        self._keys = keys
        self._batch_size = batch_size
        self._started = False
        self._closed = False

    def batches(self) -> Iterator[list[Record]]:
        """Return an iterator over non-empty batches of records.

        Returns
        -------
        Iterator of list of Record
            Batches of at most ``batch_size`` records.

        Raises
        ------
        ConnectorError
            If called twice or after :meth:`close`; while iterating, for a
            value or key that is not bytes or str, or when ``keys`` and
            ``values`` differ in length.
        """
        if self._closed:
            raise ConnectorError(f"source {self.name!r} is closed")
        if self._started:
            raise ConnectorError(f"batches() of source {self.name!r} can be iterated only once")
        self._started = True
        if self._keys is None:
            return self._plain_batches()
        return self._keyed_batches()

    def close(self) -> None:
        """Stop iteration at the next batch; calling it again is harmless."""
        self._closed = True

    def _plain_batches(self) -> Iterator[list[Record]]:
        values = iter(self._values)
        offset = 0
        while not self._closed:
            chunk = [_as_bytes(v, "value") for v in islice(values, self._batch_size)]
            if not chunk:
                return
            batch = build_records(chunk, self.name, offset)
            offset += len(batch)
            yield batch

    def _keyed_batches(self) -> Iterator[list[Record]]:
        assert self._keys is not None
        pairs = zip(self._values, self._keys, strict=True)
        offset = 0
        while not self._closed:
            batch: list[Record] = []
            try:
                for value, key in islice(pairs, self._batch_size):
                    batch.append(
                        Record(
                            _as_bytes(value, "value"),
                            Position(self.name, offset),
                            key=None if key is None else _as_bytes(key, "key"),
                        )
                    )
                    offset += 1
            except ValueError as exc:  # raised by zip(strict=True)
                raise ConnectorError(f"keys and values of {self.name!r} differ in length") from exc
            if batch:
                yield batch
            if len(batch) < self._batch_size:
                return


class MemorySink(Closing, Sink):
    """Collect output lines in a list.

    Attributes
    ----------
    lines : list of bytes
        Every line written, without the newline the sink would add.
    flushed : int
        Number of lines written before the last :meth:`flush`.
    closed : bool
        Whether :meth:`close` was called.

    Examples
    --------
    >>> sink = MemorySink()
    >>> sink.write(b"a"); sink.flush(); sink.write(b"b")
    >>> sink.lines, sink.flushed
    ([b'a', b'b'], 1)
    """

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.flushed = 0
        self.closed = False

    def write(self, line: bytes) -> None:
        """Append one line.

        Raises
        ------
        ConnectorError
            If the sink is closed or ``line`` is not bytes-like.
        """
        if self.closed:
            raise ConnectorError("write to a closed MemorySink")
        if type(line) is not bytes:
            if not isinstance(line, (bytearray, memoryview)):
                raise ConnectorError(f"line must be bytes, got {type(line).__name__}")
            line = bytes(line)
        self.lines.append(line)

    def flush(self) -> None:
        """Record that every line written so far is flushed."""
        self.flushed = len(self.lines)

    def close(self) -> None:
        """Flush and mark the sink closed; calling it again is harmless."""
        if not self.closed:
            self.flush()
            self.closed = True
