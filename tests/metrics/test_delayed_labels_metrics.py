"""``--join-key``'s metrics scraped over HTTP from a running engine: what waits, what the
bounds dropped, the served mistakes, the label delay histogram; promtool finds nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_process import EngineProcess
from prometheus_client.parser import text_string_to_metric_families
from services import http_get, require


def _lines(*objs: dict) -> bytes:
    return "".join(json.dumps(obj) + "\n" for obj in objs).encode()


@pytest.fixture(scope="module")
def scraped() -> tuple[bytes, dict]:
    """The scrape and ``/api/state`` of an engine joining a small stream, taken once it waits
    for more (its counters at rest)."""
    engine = EngineProcess("--format", "jsonl", "--join-key", "id", "--label-wait", "4",
                           "--max-pending", "50")  # fmt: skip
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
        state = json.loads(http_get(engine.url.removesuffix("metrics") + "api/state"))
    finally:
        engine.kill()
    return text, state


def _samples(text: bytes) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_the_join_is_seen_in_the_scrape_as_it_goes(scraped) -> None:
    text, _ = scraped
    samples = _samples(text)
    assert samples[("stream_perceptron_pending_examples_limit", ())] == 50  # --max-pending
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


def test_the_state_endpoint_shows_the_join_as_the_scrape_does(scraped) -> None:
    """/api/state's ``join`` (what the live page shows) holds the scrape's numbers, and the
    label delay's median and p90 are the histogram's as histogram_quantile estimates them."""
    text, state = scraped
    samples = _samples(text)
    join = state["join"]
    assert join["events_waiting"] == samples[("stream_perceptron_pending_examples",
                                              (("kind", "event"),))] == 1  # fmt: skip
    assert join["outcomes_waiting"] == samples[("stream_perceptron_pending_examples",
                                                (("kind", "outcome"),))] == 2  # fmt: skip
    assert join["max_pending"] == samples[("stream_perceptron_pending_examples_limit", ())]
    assert join["label_wait"] == 4
    for key, metric in (("joined", "joined_examples"), ("served_mistakes", "served_mistakes"),
                        ("expired", "expired_events"), ("unmatched_outcomes", "unmatched_outcomes"),
                        ("duplicate_outcomes", "duplicate_outcomes"),
                        ("duplicate_events", "duplicate_events")):  # fmt: skip
        assert join[key] == samples[(f"stream_perceptron_{metric}_total", ())], key
    assert join["served_accuracy"] == samples[("stream_perceptron_served_accuracy", ())] == 0.5
    delay, name = join["delay"], "stream_perceptron_label_delay_records"
    assert (delay["count"], delay["sum"]) == (samples[(f"{name}_count", ())],
                                              samples[(f"{name}_sum", ())])  # fmt: skip
    cumulative = 0
    for bound, n in delay["buckets"]:
        cumulative += n
        le = "+Inf" if bound == "+Inf" else f"{float(bound)}"
        assert cumulative == samples[(f"{name}_bucket", (("le", le),))], bound
    # delays 3 and 4, both in (1, 10]: rank 1 of 2 and 1.8 of 2, linear in the bucket
    assert delay["median"] == 1 + 9 * 1 / 2 and delay["p90"] == 1 + 9 * 1.8 / 2
    assert delay["mean"] == 3.5


def test_the_state_endpoint_has_no_join_without_the_flag() -> None:
    engine = EngineProcess("--format", "jsonl")
    try:
        engine.feed(_lines({"f": 1.0, "y": 1}))
        engine.wait_examples(1)
        state = json.loads(http_get(engine.url.removesuffix("metrics") + "api/state"))
    finally:
        engine.kill()
    assert state["join"] is None


def test_the_deploy_checks_know_every_metric_the_joining_engine_exposes(scraped) -> None:
    """tests/deploy/promql.py's ENGINE_METRICS (what the dashboard and the alerts may select)
    holds every name of a joining engine's scrape: a renamed join metric fails here."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
    from promql import ENGINE_METRICS

    text, _ = scraped
    # prometheus_client's creation-time series aside (nothing selects them)
    exposed = {name for name, _labels in _samples(text) if not name.endswith("_created")}
    assert {n for n in exposed if "label_delay" in n or "pending" in n}, exposed
    assert exposed <= ENGINE_METRICS, sorted(exposed - ENGINE_METRICS)
