"""What every Kafka role and client shares: client options, message splitting, offsets, checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from connectors.base import PositionKey
from connectors.errors import ConnectorError

__all__ = [
    "HEARTBEAT_MS",
    "TopicPartitionKey",
    "check_topic",
    "merge_client_options",
    "make_client",
    "needs_split",
    "servers_text",
    "split_message",
]

#: ``(topic, partition)``: the connectors' position key; a partition is never None here.
TopicPartitionKey = PositionKey

#: a group consumer's heartbeat interval (both clients' default is 3 s): a member learns that
#: the group rebalances (a member joining or leaving) from a heartbeat's answer, and the group
#: waits for every member to rejoin; a worker that joined a running group waited 2-3 s for its
#: partitions (row 17, 2 workers started at once: 2.0-3.0 s of a 7-10 s run). A heartbeat is a
#: small request; the session timeout, which says when a member is taken as gone, is apart.
HEARTBEAT_MS = 500


def merge_client_options(
    defaults: dict[str, Any],
    client_options: dict[str, Any] | None,
    fixed: dict[str, Any],
    also_reserved: Iterable[str] = (),
) -> dict[str, Any]:
    """A client's settings: ``defaults``, updated with ``client_options``, then ``fixed``.

    Parameters
    ----------
    defaults
        Settings of the connector that the caller may override.
    client_options
        The client's settings given by the caller (security, timeouts...), in its names.
    fixed
        Settings the connector sets itself: a client option may not set them.
    also_reserved
        Further keys a client option may not set (the connector's own serializers...).

    Raises
    ------
    ConnectorError
        If ``client_options`` is not a dict or sets a reserved key.

    Examples
    --------
    >>> merge_client_options({"acks": "all", "linger_ms": 5}, {"linger_ms": 20},
    ...                      {"bootstrap_servers": "h:1"})
    {'acks': 'all', 'linger_ms': 20, 'bootstrap_servers': 'h:1'}
    >>> merge_client_options({}, {"bootstrap_servers": "x:2"}, {"bootstrap_servers": "h:1"})
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: client_options may not set bootstrap_servers
    """
    options = dict(client_options or {})
    if client_options is not None and not isinstance(client_options, dict):
        raise ConnectorError(f"client_options must be a dict, got {type(client_options).__name__}")
    clash = sorted(set(options) & {*fixed, *also_reserved})
    if clash:
        raise ConnectorError(f"client_options may not set {', '.join(clash)}")
    return {**defaults, **options, **fixed}


def split_message(value: bytes) -> list[bytes]:
    """Split a message value into lines, as :class:`KafkaSource` does.

    A line ends at ``b"\\n"``; a ``b"\\r"`` ending a line is removed. A final
    newline does not start another line, but empty lines elsewhere are kept,
    so every message gives at least one line and nothing is dropped.

    Parameters
    ----------
    value
        The message value.

    Returns
    -------
    list of bytes
        The lines, without terminators.

    Examples
    --------
    >>> split_message(b"a\\r\\n\\nb\\n")
    [b'a', b'', b'b']
    >>> split_message(b""), split_message(b"\\n"), split_message(b"x\\r")
    ([b''], [b''], [b'x'])
    """
    lines = value.split(b"\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def servers_text(bootstrap_servers: str | list[str]) -> str:
    """``bootstrap_servers`` as librdkafka takes them: one comma-separated string.

    Examples
    --------
    >>> servers_text(["a:1", "b:2"]), servers_text("a:1")
    ('a:1,b:2', 'a:1')
    """
    if isinstance(bootstrap_servers, str):
        return bootstrap_servers
    return ",".join(bootstrap_servers)


def make_client(
    create: Callable[[], Any], what: str, servers: object, errors: tuple[type[BaseException], ...],
    config: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    """``create()``, its ``errors`` (and bad settings) raised as a ConnectorError saying which
    client for which brokers could not be made; with SASL in ``config`` (kafka-python's
    names), a client that could not bootstrap is said to be perhaps refused its credentials
    (the broker closes the connection on a wrong password, which kafka-python does not always
    get to report).

    Examples
    --------
    >>> make_client(lambda: int("x"), "consumer", "h:1", ())
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: cannot create a Kafka consumer for 'h:1': ValueError(...)
    """
    caught: tuple[type[BaseException], ...] = (*errors, ValueError, TypeError)
    try:
        return create()
    except caught as exc:
        hint = ""
        if (config or {}).get("sasl_mechanism") and "bootstrap" in str(exc).lower():
            hint = (
                " (with SASL this is also how a wrong user name or password shows: check "
                "STREAM_PERCEPTRON_KAFKA_USERNAME/PASSWORD, authentication failed?)"
            )
        raise ConnectorError(
            f"cannot create a Kafka {what} for {servers!r}: {exc!r}{hint}"
        ) from exc


def needs_split(values: list[bytes]) -> bool:
    """Whether any of ``values`` holds more than one line or ends with ``b"\\r"`` (one C-level
    scan; a ``b"\\r"`` anywhere answers yes, the careful per-message path then decides).

    Examples
    --------
    >>> needs_split([b"1,2", b"3,4"]), needs_split([b"1,2", b"a\\nb"]), needs_split([b"x\\r"])
    (False, True, True)
    """
    joined = b"".join(values)
    return b"\n" in joined or b"\r" in joined


def check_topic(topic: object) -> str:
    """``topic`` when it is a non-empty str.

    Examples
    --------
    >>> check_topic("events")
    'events'
    >>> check_topic("")
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: topic must be a non-empty str, got ''
    """
    if not isinstance(topic, str) or not topic:
        raise ConnectorError(f"topic must be a non-empty str, got {topic!r}")
    return topic


def check_offsets(offsets: object, what: str) -> dict[TopicPartitionKey, int]:
    if not isinstance(offsets, dict):
        raise ConnectorError(f"{what} must be a dict, got {type(offsets).__name__}")
    for key, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ConnectorError(f"{what}: offset of {key!r} must be an int >= 0, got {offset!r}")
    return offsets
