"""A block's raw label cells, held as its few distinct cells and one small id per row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

__all__ = ["LabelCells", "distinct_cells"]


class LabelCells(Sequence[bytes]):
    """The label cells of a block's rows: row ``i``'s cell is ``distinct[ids[i]]``.

    A block scanner gives them so when a block holds few distinct cells (the usual case: two
    classes, or ten): no bytes object is made per row, and a reader that works per distinct
    cell (label encoding, the predictions' cases) indexes arrays by ``ids`` instead. It is a
    read-only sequence of the cells, equal to the list of them, for every other reader.
    ``ids`` are int32, in any sequence with ``tolist()`` that gives its buffer (the scanner's
    is a ``memoryview`` of format ``"i"``; an ``array("i")`` or a NumPy array do as well).

    Examples
    --------
    >>> from array import array
    >>> cells = LabelCells([b"1", b"0"], array("i", [0, 1, 1, 0]))
    >>> len(cells), cells[1], list(cells), cells[-2:]
    (4, b'0', [b'1', b'0', b'0', b'1'], [b'0', b'1'])
    >>> cells == [b"1", b"0", b"0", b"1"]
    True

    """

    __slots__ = ("distinct", "ids")

    def __init__(self, distinct: list[bytes], ids: Any) -> None:
        self.distinct = distinct
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(map(self.distinct.__getitem__, self.ids[index].tolist()))
        return self.distinct[self.ids[index]]

    def __iter__(self) -> Iterator[bytes]:
        return map(self.distinct.__getitem__, self.ids.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LabelCells, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LabelCells({len(self)} rows, distinct={self.distinct!r})"


def distinct_cells(cells: Sequence[bytes]) -> set[bytes] | list[bytes]:
    """Each distinct cell of ``cells`` once (a :class:`LabelCells`' own list: no row read)."""
    return cells.distinct if isinstance(cells, LabelCells) else set(cells)
