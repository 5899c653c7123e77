"""What a failed test leaves for the one who reads CI's output (not a test module).

A broker test that fails one run in twenty must be diagnosable from that one run: on failure,
``tests/conftest.py`` appends to the report the tails of the ``*.log`` files in the test's
``tmp_path`` (the workers' stderr) and, for every model topic the test registered with
:func:`keep_topic`, its records, written in full to ``<tmp_path>/<topic>.records.txt`` (kept
there: pytest keeps the last runs' tmp dirs).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

#: ``(bootstrap, topic)`` of the model topics the running test made
topics: list[tuple[str, str]] = []

LOG_LINES = 60  # lines of each log's tail in the report
MAX_LOGS = 8
RECORD_LINES = 60  # lines of each topic's dump in the report
#: an own broker's data segments (``00000000000000000000.log``) are not logs to read
_KAFKA_SEGMENT = re.compile(r"^\d+\.log$")


def keep_topic(bootstrap: str, topic: str) -> str:
    """Dump ``topic``'s records if the running test fails; returns ``topic``."""
    if (bootstrap, topic) not in topics:
        topics.append((bootstrap, topic))
    return topic


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(unreadable: {e})"
    return "\n".join(text.splitlines()[-lines:])


#: a broker's own log: besides its tail (at report time, most often its shutdown), the lines that
#: say what went wrong while it served (fenced, lost its controller, refused a request)
_BROKER_TROUBLE = re.compile(
    r"\] (WARN|ERROR|FATAL) |[Ff]enc(ed|ing)|[Uu]nregistered|session expired"
)


def _trouble(path: Path, lines: int) -> str | None:
    """A broker ``server.log``'s WARN/ERROR and fencing lines (the last ``lines``), else None."""
    if path.name != "server.log":
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    found = [line for line in text.splitlines() if _BROKER_TROUBLE.search(line)]
    return "\n".join(found[-lines:]) if found else "(no WARN, ERROR or fencing line)"


def _summary(value: bytes | None) -> str:
    if value is None:
        return "tombstone"
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):  # a hostile record nested past the decoder's depth
        return f"{len(value)} bytes, not JSON: {value[:80]!r}"
    if not isinstance(doc, dict):
        return f"{len(value)} bytes: {type(doc).__name__}"
    scalars = {k: v for k, v in doc.items() if isinstance(v, str | int | float | bool | None)}
    return f"{len(value)} bytes {json.dumps(scalars)[:400]}"


def dump_topic(bootstrap: str, topic: str, path: Path, timeout: float = 15.0) -> str:
    """Every record of ``topic`` (read_uncommitted: aborted ones too, marked by nothing), one
    line each, written to ``path``; returns the text."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    lines: list[str] = []
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    key = m.key.decode(errors="replace") if m.key else None
                    lines.append(f"{tp.partition}:{m.offset} {key} {_summary(m.value)}")
    finally:
        consumer.close()
    text = "\n".join(lines)
    path.write_text(text + "\n")
    return text


def collect(item: pytest.Item) -> list[tuple[str, str]]:
    """The report sections of a failed test: its logs' tails, its model topics' records."""
    sections: list[tuple[str, str]] = []
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp, Path) and tmp.is_dir():
        logs = sorted(
            (p for p in tmp.rglob("*.log") if not _KAFKA_SEGMENT.match(p.name)),
            key=lambda p: p.stat().st_mtime,
        )[-MAX_LOGS:]
        for log in logs:
            sections.append((f"log tail {log}", _tail(log, LOG_LINES)))
            trouble = _trouble(log, LOG_LINES)
            if trouble is not None:
                sections.append((f"broker trouble in {log}", trouble))
    for bootstrap, topic in topics:
        where = (tmp if isinstance(tmp, Path) else Path(".")) / f"{topic}.records.txt"
        try:
            text = dump_topic(bootstrap, topic, where)
        except Exception as e:  # noqa: BLE001 - evidence is best effort; the failure stands
            sections.append((f"model topic {topic}", f"(not read: {e!r})"))
            continue
        shown = "\n".join(text.splitlines()[-RECORD_LINES:])
        sections.append((f"model topic {topic}: last records (all in {where})", shown))
    return sections
