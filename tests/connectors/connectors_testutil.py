"""Helpers shared by the connectors tests (not a test module)."""

from __future__ import annotations

import io
from collections.abc import Iterable

from connectors import LineSource


def collect(source: LineSource) -> list[tuple[int, bytes, str | None]]:
    """Return ``(offset, value, error)`` of every record, checking batches."""
    out: list[tuple[int, bytes, str | None]] = []
    for batch in source.batches():
        assert batch, "a source must never yield an empty batch"
        out.extend((r.position.offset, r.value, r.error) for r in batch)
    return out


def values(data: bytes, **kw: int) -> list[bytes]:
    """Values of the records LineSource makes of ``data``."""
    with LineSource(io.BytesIO(data), **kw) as source:
        return [value for _, value, _ in collect(source)]


class PieceStream(io.RawIOBase):
    """Raw stream returning ``data`` in pieces of the given sizes (cycled).

    Simulates a pipe, where a read returns whatever has arrived.
    """

    def __init__(self, data: bytes, sizes: Iterable[int]) -> None:
        self._data = memoryview(data)
        self._sizes = list(sizes) or [len(data) or 1]
        self._pos = 0
        self._i = 0
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self.reads += 1
        size = self._sizes[self._i % len(self._sizes)]
        self._i += 1
        n = min(size, len(buffer), len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n
