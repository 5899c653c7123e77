"""A run of consecutive lines of one source, kept as the bytes they arrived in."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.record import Record, build_records

__all__ = ["LineBlock"]


@dataclass(frozen=True, slots=True)
class LineBlock:
    """``count`` consecutive complete lines of ``source``, the first at offset ``start``.

    ``data`` holds the lines, each ending with ``\\n`` (the ``\\r`` of a ``\\r\\n`` already
    removed), exactly as :meth:`records` would give them one by one. A consumer that can take
    the lines whole (a vectorised parser) reads ``data`` without making a record per line; any
    other consumer calls :meth:`records`. No line of a block is longer than the source's
    ``max_line_bytes``, and none is held back: a block ends where a read ended.

    Examples
    --------
    >>> block = LineBlock(b"a,b\\n1,2\\n", "stdin", 7, 2)
    >>> [(r.value, r.position.offset) for r in block.records()]
    [(b'a,b', 7), (b'1,2', 8)]
    >>> block.end
    9
    """

    data: bytes
    source: str
    start: int
    count: int

    @property
    def end(self) -> int:
        """Offset of the line after the block."""
        return self.start + self.count

    def records(self) -> list[Record]:
        """The lines as good records with consecutive offsets."""
        return build_records(self.data[:-1].split(b"\n"), self.source, self.start)

    def __repr__(self) -> str:
        return f"LineBlock({self.source}@{self.start}, {self.count} lines, {len(self.data)} bytes)"
