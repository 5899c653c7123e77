"""Exception hierarchy of the connectors package.

Every error raised on purpose by a source or sink is a
:class:`ConnectorError`, so the engine can catch connector failures with a
single ``except`` clause. Low-level causes (``OSError`` and friends) are
chained via ``raise ... from``.
"""

from __future__ import annotations

__all__ = ["ConnectorError"]


class ConnectorError(Exception):
    """Base class of all errors raised by sources and sinks.

    Examples
    --------
    >>> try:
    ...     raise ConnectorError("cannot open 'x'")
    ... except ConnectorError as exc:
    ...     str(exc)
    "cannot open 'x'"
    """
