"""A run of consecutive lines of one source, kept as the bytes they arrived in."""

from __future__ import annotations

from connectors.record import Record, build_records

__all__ = ["LineBlock"]


class LineBlock:
    """``count`` consecutive complete lines of ``source``, the first at offset ``start``.

    ``data`` holds the lines, each ending with ``\\n`` (the ``\\r`` of a ``\\r\\n`` already
    removed), exactly as :meth:`records` would give them one by one. A consumer that can take
    the lines whole (a vectorised parser) reads ``data`` without making a record per line; any
    other consumer calls :meth:`records`. No line of a block is longer than the source's
    ``max_line_bytes``, and none is held back: a block ends where a read ended.

    ``count`` may be left out: it is then counted when first asked, unless a consumer that
    counts the lines anyway (a block scanner) says it first with :meth:`found_count`. The
    source asks only once the block is consumed.

    Examples
    --------
    >>> block = LineBlock(b"a,b\\n1,2\\n", "stdin", 7)
    >>> [(r.value, r.position.offset) for r in block.records()]
    [(b'a,b', 7), (b'1,2', 8)]
    >>> block.known_count, block.end, block.known_count
    (None, 9, 2)
    """

    __slots__ = ("data", "source", "start", "_count")

    def __init__(self, data: bytes, source: str, start: int, count: int | None = None) -> None:
        self.data = data
        self.source = source
        self.start = start
        self._count = count

    @property
    def count(self) -> int:
        """How many lines the block holds."""
        if self._count is None:
            self._count = self.data.count(b"\n")
        return self._count

    @property
    def known_count(self) -> int | None:
        """:attr:`count` if it is known already, else ``None`` (nothing counted)."""
        return self._count

    def found_count(self, count: int) -> None:
        """Record ``count``, the lines a consumer found in :attr:`data` (every ``\\n``)."""
        self._count = count

    @property
    def end(self) -> int:
        """Offset of the line after the block."""
        return self.start + self.count

    def records(self) -> list[Record]:
        """The lines as good records with consecutive offsets."""
        return build_records(self.data[:-1].split(b"\n"), self.source, self.start)

    def __repr__(self) -> str:
        return f"LineBlock({self.source}@{self.start}, {self.count} lines, {len(self.data)} bytes)"
