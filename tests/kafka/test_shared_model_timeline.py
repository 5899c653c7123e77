"""A real shared-model worker against the real broker says where its time goes (issue 45):
``stream_perceptron_shared_phase_seconds_total{phase}`` over HTTP while it runs, the closing
log line and ``--summary-json``'s ``timeline`` when it ends."""

from __future__ import annotations

import json
import signal
import time

from shared_model_helpers import (
    PARTITIONS,
    examples,
    make_topics,
    name,
    produce,
    start_worker,
    wait_for,
    worker_args,
)

from stream_perceptron.sharing.timeline import PHASES

#: the phases one worker that learns, commits, mixes and moves onto its mixtures spends time in
#: (alone it never waits for others, and a join can be quicker than the clock's resolution)
BUSY = ("learn", "increment", "transaction", "read", "fold", "move", "restore")


def _scrape(url: str) -> dict[tuple[str, str | None], float]:
    from prometheus_client.parser import text_string_to_metric_families
    from services import http_get

    return {
        (s.name, s.labels.get("phase")): s.value
        for family in text_string_to_metric_families(http_get(url).decode())
        for s in family.samples
    }


def test_a_worker_exposes_its_timeline_over_http_and_in_its_summary(
    kafka_bootstrap, kafka_client, tmp_path
):
    data = examples(6000, seed=17, noise=0.05)
    (topic,) = make_topics(kafka_bootstrap, PARTITIONS)
    produce(kafka_bootstrap, topic, data)
    summary = tmp_path / "summary.json"
    args = worker_args(kafka_bootstrap, topic, name("group"), name("model"), "--averaged",
                       "--mix-every", "500", "--summary-json", str(summary), "-v",
                       client=kafka_client)  # fmt: skip
    args[args.index("--metrics-port") + 1] = "0"
    log = tmp_path / "w.log"
    proc = start_worker(args, log)
    try:
        wait_for(log, "metrics on http://")
        url = log.read_text().split("metrics on ", 1)[1].split()[0]
        deadline = time.monotonic() + 60
        while True:
            samples = _scrape(url)
            if (samples.get(("stream_perceptron_examples_total", None)) == len(data)
                    and samples.get(("stream_perceptron_mixes_total", None), 0) >= 2):  # fmt: skip
                break
            assert time.monotonic() < deadline, samples
            time.sleep(0.5)
        phase = "stream_perceptron_shared_phase_seconds_total"
        seconds = {p: samples[(phase, p)] for p in (*PHASES, "other")}
        calls = {p: samples[("stream_perceptron_shared_phase_calls_total", p)] for p in PHASES}
        wall = samples[("stream_perceptron_shared_wall_seconds_total", None)]
        assert all(v >= 0 for v in seconds.values()), seconds
        for p in BUSY:
            assert seconds[p] > 0 and calls[p] > 0, (p, seconds, calls)
        # scraped a moment after the wall time was taken: within the scrape's own time
        assert sum(seconds[p] for p in PHASES) <= wall + 0.05, (seconds, wall)
        assert abs(sum(seconds.values()) - wall) <= 0.05 + 0.01 * wall, (seconds, wall)
        assert samples[("stream_perceptron_shared_cpu_seconds_total", None)] > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    timeline = json.loads(summary.read_text())["timeline"]
    assert sum(timeline["phases"].values()) <= timeline["wall_seconds"]
    assert all(v >= 0 for v in timeline["phases"].values())
    for p in BUSY:
        assert timeline["phases"][p] > 0, (p, timeline)
    assert timeline["phases"]["learn"] >= seconds["learn"]  # counted on to the end
    assert timeline["detail_calls"]["commit"] >= 2
    assert timeline["cpu_seconds"] > 0
    closing = [line for line in log.read_text().splitlines() if "; timeline: " in line]
    assert len(closing) == 1 and " s wall, " in closing[0] and "learn " in closing[0], closing
