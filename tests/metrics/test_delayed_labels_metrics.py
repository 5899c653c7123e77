"""``--join-key``'s metrics scraped over HTTP from a running engine: what waits, what the
bounds dropped, the served mistakes, the label delay histogram; promtool finds nothing."""

from __future__ import annotations

import json
import subprocess

from engine_process import EngineProcess
from prometheus_client.parser import text_string_to_metric_families
from services import http_get, require


def _lines(*objs: dict) -> bytes:
    return "".join(json.dumps(obj) + "\n" for obj in objs).encode()


def test_the_join_is_seen_in_the_scrape_as_it_goes() -> None:
    engine = EngineProcess("--format", "jsonl", "--join-key", "id", "--label-wait", "4")
    try:
        engine.feed(_lines(
            {"id": "a", "f": 1.0}, {"id": "b", "f": -1.0}, {"id": "c", "f": 2.0},
            {"id": "a", "y": 1}, {"id": "a", "y": 0},  # a duplicate: the first outcome wins
            {"id": "ghost", "y": 1},  # no event: unmatched once 4 records have passed
            {"id": "c", "y": 0},  # 4 records after its event: joined
            {"id": "b", "y": 0},  # 6 after: "b" expired at the record before
            {"id": "d", "f": 1.0},  # waits ("ghost" still waits, and out("b"))
            {"id": "z", "f": 1.0, "y": 1},  # learned at once: the scrape waits for it
        ))  # fmt: skip
        engine.wait_examples(3)
        text = http_get(engine.url)
    finally:
        engine.kill()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }
    assert samples[("stream_perceptron_pending_examples", (("kind", "event"),))] == 1
    assert samples[("stream_perceptron_pending_examples", (("kind", "outcome"),))] == 2
    for name, value in (("joined_examples", 2), ("duplicate_outcomes", 1), ("expired_events", 1),
                        ("unmatched_outcomes", 0), ("served_mistakes", 1),
                        ("examples", 3), ("duplicate_events", 0)):  # fmt: skip
        assert samples[(f"stream_perceptron_{name}_total", ())] == value, name
    delay = "stream_perceptron_label_delay_records"
    assert samples[(f"{delay}_bucket", (("le", "1.0"),))] == 0
    assert samples[(f"{delay}_bucket", (("le", "10.0"),))] == 2  # a's 3 records late, c's 4
    assert (samples[(f"{delay}_count", ())], samples[(f"{delay}_sum", ())]) == (2, 7)
    promtool = require("promtool", "prometheus")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), (
        result.stdout + result.stderr
    ).decode()
