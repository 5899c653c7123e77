"""The value types of the command line's flags (each a clear usage error when a value does
not fit) and the flag sets several commands share: -v/-q, ``--kafka-client``, Kafka security."""

from __future__ import annotations

import argparse
import urllib.parse
from collections.abc import Callable

__all__ = [
    "MAX_SECONDS",
    "Millis",
    "add_client_flag",
    "add_security_flags",
    "float_upto",
    "half_life",
    "http_url",
    "int_in",
    "listen_host",
    "logging_options",
    "positive_float",
    "positive_int",
    "records_or_duration",
    "text",
]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {low} to {high}")
        return value

    return parse


class Millis(int):
    """A duration given on the command line, in milliseconds (an ``int`` told apart from a
    count by its type)."""


#: A duration's units, in milliseconds.
_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def records_or_duration(text: str) -> int:
    """An argument type: a whole number of records, or a duration (a number and a unit: ms, s,
    m, h or d), returned as :class:`Millis`.

    >>> records_or_duration("5000"), records_or_duration("90s"), records_or_duration("1.5h")
    (5000, 90000, 5400000)
    >>> type(records_or_duration("7d")).__name__
    'Millis'
    """
    text = text.strip()
    unit = next((u for u in ("ms", "s", "m", "h", "d") if text.endswith(u)), None)
    if unit is None and text.lstrip("+-").isdigit():
        return int_in(0, 1 << 62)(text)
    try:
        value = float(text[: -len(unit)]) if unit is not None else float("nan")
    except ValueError:
        value = float("nan")
    ms = value * _UNITS[unit or "ms"]
    if not 0 <= ms <= 1 << 62:  # NaN too
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a whole number of records nor a duration such as 90s, 30m, "
            "2h or 7d (from 0 to 2**62 milliseconds)"
        )
    return Millis(round(ms))


def float_upto(high: float) -> Callable[[str], float]:
    """An argument type: a positive finite number of at most ``high``."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if not value <= high:  # also refuses inf and nan
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {high:g}")
        return value

    return parse


def http_url(text: str) -> str:
    """A Pushgateway address: ``http(s)://host[:port][/path]`` or ``host:port``."""
    url = text if "://" in text else f"http://{text}"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL: {e}") from None
    spaced = any(c.isspace() for c in text)
    if parts.scheme not in ("http", "https") or not parts.hostname or spaced:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL of a host")
    return text


def half_life(text: str) -> float:
    """``--average-half-life``: the learner's own rule (``check_half_life``), up to 1e12."""
    from stream_perceptron.learners._linear import check_half_life

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    problem = check_half_life(value)
    if problem is None and not value <= 1e12:
        problem = "must be at most 1e+12"
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return value


def text(text: str) -> str:
    """A name that reaches an exporter (a topic, group or run name as a label): text that can be
    written as UTF-8 (not bytes of another encoding, which argv holds as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!a} is not UTF-8 text") from None
    return text


def listen_host(text: str) -> str:
    """``--metrics-host``: an address or name to bind; never empty (which binds every interface
    unasked): every interface is ``0.0.0.0`` or ``::``, said so."""
    if not text or any(c.isspace() for c in text) or text.startswith("["):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give an address such as 127.0.0.1, or 0.0.0.0 for every "
            "interface"
        )
    return text


MAX_SECONDS = 1e6  # about 11 days: longer waits are not what anybody means (and overflow timers)


def logging_options() -> argparse.ArgumentParser:
    """-v/-q, accepted before or after the command (``default=SUPPRESS`` keeps the first)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more log output"
    )
    common.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="errors only"
    )
    return common


def add_client_flag(group: argparse._ActionsContainer, more: str = "") -> None:
    """``--kafka-client`` of every command that talks to Kafka."""
    group.add_argument(
        "--kafka-client",
        choices=("auto", "confluent-kafka", "kafka-python"),
        default="auto",
        help="the Kafka client library (default auto: confluent-kafka, librdkafka from the extra "
        "stream-perceptron[rdkafka], about 5x faster, where it is installed, else kafka-python "
        "with a notice)" + more,
    )


def add_security_flags(group: argparse._ActionsContainer) -> None:
    """The security flags of every command that talks to Kafka (``run``, ``pull-model``)."""
    group.add_argument(
        "--security-protocol",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        help="how the client talks to the brokers (default PLAINTEXT)",
    )
    group.add_argument(
        "--sasl-mechanism",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        help="with SASL_*: the user name and password come from the environment, "
        "STREAM_PERCEPTRON_KAFKA_USERNAME and STREAM_PERCEPTRON_KAFKA_PASSWORD (never flags)",
    )
    group.add_argument(
        "--ssl-cafile", metavar="PATH", help="the CA certificate (PEM) of the brokers"
    )
    group.add_argument(
        "--ssl-certfile", metavar="PATH", help="client certificate (PEM), for mutual TLS"
    )
    group.add_argument("--ssl-keyfile", metavar="PATH", help="its private key (PEM)")
