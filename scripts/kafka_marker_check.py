#!/usr/bin/env python3
"""Does this Kafka lose a committed transaction when its only broker crashes?

Kafka 4.3.1 does (docs/shared-model.md, "A broker bug to know"): a broker killed between a
commit's answer and its markers finishes the commit from its log when it starts again, but it
cannot reach its own listener until the controller has fenced its former registration (about
9 s), and while that fencing leaves the partitions without a leader its transaction
coordinator skips their markers ("Couldn't find leader endpoint for partitions ... can be
skipped"). The records the producer was told were committed then read as aborted, or never
become readable.

Each run here starts a one-broker cluster (``kafka/kafka-up.sh``, on 127.0.0.1) in a tmp
dir, commits 30 records to topic A, then 300 to A's 3 partitions and 1 to topic B in a
second transaction; kills the broker with SIGKILL ``--delay`` seconds after that commit is
answered; starts it again; once the fencing is past, the same transactional id opens and
aborts a transaction on A. Then it counts what ``read_committed`` reads of A and B (330 and
1 when nothing is lost). No stream-perceptron code is involved: only confluent-kafka and the
broker. Session 34, Kafka 4.3.1: 4 of 11 runs lost the whole second transaction with
``--delay 0`` (every run logged a skip; the others had written their markers before the
kill), none of 5 with ``--delay 1``. Exit 1 when a run lost records.

Run it with the project's venv, when the pinned Kafka version changes::

    .venv/bin/python scripts/kafka_marker_check.py --runs 5
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_broker import crash_broker, free_port, start_broker, stop_broker  # noqa: E402

#: past the controller's fencing of the crashed broker's registration (9 s by default)
SETTLE_S = 20.0
_SILENT = logging.getLogger("kafka_marker_check.clients")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
QUIET = {"logger": _SILENT}  # the clients' own lines about the broker being away


def _read_committed(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records of ``topic`` a read_committed consumer reads (5 s without one ends)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "marker-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         **QUIET})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, last = 0, time.monotonic()
    try:
        while time.monotonic() - last < 5:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                count, last = count + 1, time.monotonic()
    finally:
        consumer.close()
    return count


def one_run(state: Path, delay: float) -> tuple[int, int, int]:
    """(records of A read, records of B read, marker skips the broker logged)."""
    port = free_port()
    bootstrap = start_broker(state_dir=state, port=port)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        for future in admin.create_topics([NewTopic("A", 3, 1), NewTopic("B", 1, 1)]).values():
            future.result()
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "check",
                             "linger.ms": 5, **QUIET})  # fmt: skip
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(30):
            producer.produce("A", b"first", partition=i % 3)
        producer.commit_transaction(30)
        time.sleep(1)  # its markers written
        producer.begin_transaction()
        for i in range(300):
            producer.produce("A", b"second", partition=i % 3)
        producer.produce("B", b"second")
        producer.flush(30)
        pid = int((state / "kafka.pid").read_text())
        producer.commit_transaction(30)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        crash_broker(state)
        time.sleep(2)
        start_broker(state_dir=state, port=port)
        time.sleep(SETTLE_S)
        again = Producer({"bootstrap.servers": bootstrap, "transactional.id": "check", **QUIET})
        again.init_transactions(60)
        again.begin_transaction()
        for i in range(10):
            again.produce("A", b"aborted", partition=i % 3)
        again.flush(30)
        again.abort_transaction(30)
        logs = "".join(p.read_text(errors="replace") for p in state.glob("server.log*"))
        skips = logs.count("Couldn't find leader endpoint")
        return _read_committed(bootstrap, "A", 3), _read_committed(bootstrap, "B", 1), skips
    finally:
        stop_broker(state_dir=state)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="broker crashes to try (default 5)")
    parser.add_argument(
        "--delay", type=float, default=0.0,
        help="seconds between the commit's answer and the kill (default 0)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", type=Path, default=None,
        help="keep the broker state of runs that lost records under this dir",
    )  # fmt: skip
    args = parser.parse_args()
    lost_runs = 0
    with tempfile.TemporaryDirectory(prefix="kafka-marker-check-") as tmp:
        for run in range(1, args.runs + 1):
            state = Path(tmp) / f"run{run}"
            a, b, skips = one_run(state, args.delay)
            lost = a != 330 or b != 1
            lost_runs += lost
            print(f"run {run}: A {a} of 330, B {b} of 1 read_committed; the broker logged "
                  f"{skips} marker skips: {'LOST' if lost else 'ok'}", flush=True)  # fmt: skip
            if lost and args.keep is not None:
                shutil.copytree(state, args.keep / f"run{run}", dirs_exist_ok=True)
    print(f"{lost_runs} of {args.runs} runs lost committed records (--delay {args.delay:g})")
    return 1 if lost_runs else 0


if __name__ == "__main__":
    sys.exit(main())
