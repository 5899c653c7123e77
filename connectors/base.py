"""Structural interfaces every source and sink implements.

Sources and sinks move raw bytes; they know nothing about formats, models
or machine learning.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, Self, runtime_checkable

from connectors.record import Record

__all__ = ["Closing", "Sink", "Source"]


@runtime_checkable
class Source(Protocol):
    """A stream of records, delivered in batches.

    Concrete sources are also context managers whose exit calls
    :meth:`close`.

    Examples
    --------
    >>> from connectors.memory import MemorySource
    >>> isinstance(MemorySource([b"x"]), Source)
    True
    """

    def batches(self) -> Iterator[list[Record]]:
        """Yield lists of records in stream order; never an empty list."""
        ...

    def close(self) -> None:
        """Release resources; iteration stops at the next batch boundary."""
        ...


@runtime_checkable
class Sink(Protocol):
    """A destination for output lines.

    Examples
    --------
    >>> from connectors.memory import MemorySink
    >>> isinstance(MemorySink(), Sink)
    True
    """

    def write(self, line: bytes) -> None:
        """Write one output line; the sink appends the ``b"\\n"``."""
        ...

    def flush(self) -> None:
        """Make everything written so far durable / visible."""
        ...

    def close(self) -> None:
        """Flush and release resources."""
        ...


class Closing:
    """Context-manager support for sources and sinks: ``with`` calls :meth:`close` at exit."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()  # type: ignore[attr-defined]
