"""What a failed test leaves for the one who reads CI's output (not a test module).

A broker test that fails one run in twenty must be diagnosable from that one run: on failure,
``tests/conftest.py`` appends to the report the tails of the ``*.log`` files in the test's
``tmp_path`` (the workers' stderr) and, for every model topic the test registered with
:func:`keep_topic`, its records, written in full to ``<tmp_path>/<topic>.records.txt`` (kept
there: pytest keeps the last runs' tmp dirs), and the stalls of the machine during the test.

A stall is a wake-up of a process that only sleeps (:func:`watch_machine`, one per pytest
process) that came more than ``STALL_S`` late: the machine, or at least that process, did not
run. A broker soak (session 28) failed once with two brokers' logs silent over the same 32 s
and no JVM pause in either: without this, nothing in a report says the whole machine stood
still, rather than the product or the broker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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


#: a sleeper's wake-up this late is a stall of the machine (or of the sleeper's process)
STALL_S = 2.0
_SLEEPER = """
import os, sys, time
out, parent, stall = open(sys.argv[1], "a", buffering=1), os.getppid(), float(sys.argv[2])
def steal():  # the time the hypervisor ran something else on this machine's CPUs (1/100 s)
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0
while os.getppid() == parent:
    started, wall, stolen = time.monotonic(), time.time(), steal()
    time.sleep(0.2)
    late = time.monotonic() - started - 0.2
    if late > stall:
        out.write(f"{wall:.3f} {late:.2f} {(steal() - stolen) / 100:.2f}\\n")
"""


def watch_machine(path: Path) -> subprocess.Popen:
    """Start a sleeper that writes each stall it meets to ``path`` (``start late steal``, in
    seconds); it ends with its parent."""
    return subprocess.Popen([sys.executable, "-c", _SLEEPER, str(path), str(STALL_S)],
                            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip


def stalls(path: Path, since: float, until: float) -> list[str]:
    """The stalls in ``path`` that overlap ``since``..``until`` (wall clock), as text."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            start, late, stolen = (float(v) for v in line.split())
        except ValueError:
            continue
        if start + late + 0.2 >= since and start <= until:
            when = time.strftime("%H:%M:%S", time.gmtime(start))
            out.append(f"{when} UTC: stood still {late:.1f} s (steal time +{stolen:.2f} s)")
    return out


#: where this process's sleeper writes, and when the running test began (wall clock)
stall_log: Path | None = None
test_started = 0.0


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
    """The report sections of a failed test: its logs' tails, its model topics' records, the
    machine's stalls while it ran."""
    sections: list[tuple[str, str]] = []
    if stall_log is not None:
        met = stalls(stall_log, test_started, time.time())
        if met:
            sections.append((f"the machine stood still during this test (pid {os.getpid()}'s "
                             f"sleeper, {stall_log})", "\n".join(met)))  # fmt: skip
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
