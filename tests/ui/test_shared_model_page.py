"""The live page of shared-model workers (``--model-topic ... --ui``), on the real broker and
in a real browser: three workers learn one model from a stream produced while they run; the
page of one of them shows the mixture version advancing and all three workers with their
partitions, and agrees with its ``/api/state``."""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))  # the broker's helpers

from shared_model_helpers import (  # noqa: E402
    PARTITIONS,
    examples,
    make_topics,
    name,
    produce,
    start_worker,
)
from test_live_page import _browser, _text, _wait  # noqa: E402

pytestmark = pytest.mark.browser

def _url(log, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(rb"live page on (http://\S+/)", log.read_bytes())
        if found:
            return found.group(1).decode()
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.1)


def _state(url: str) -> dict:
    return json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())


def test_the_page_shows_the_group(kafka_bootstrap, tmp_path):
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 1)
    model_topic, group = name("model"), name("group")
    data = examples(30_000, seed=41, noise=0.05)
    args = ["run", "--source", "kafka", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
            "--group", group, "--format", "jsonl", "--model-topic", model_topic,
            "--kafka-client", "confluent-kafka", "--kafka-option", "session.timeout.ms=6000",
            "--mix-every", "600", "--checkpoint-interval", "0.3",
            "--predictions-topic", predictions, "--ui", "--metrics-port", "0", "-v"]  # fmt: skip
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    procs = [start_worker([*args, "--instance-id", f"w{i}"], log) for i, log in enumerate(logs)]
    stop = threading.Event()

    def feed() -> None:  # a slice every 0.4 s: the group learns and mixes while we watch
        for start in range(0, len(data), 600):
            if stop.is_set():
                return
            produce(kafka_bootstrap, topic, data[start : start + 600], start=start)
            time.sleep(0.4)

    driver = None
    try:
        url = _url(logs[0])
        for log in logs:  # every worker in the group, with its partitions, before any record
            _wait(lambda log=log: f"assigned [('{topic}'".encode() in log.read_bytes(), 90,
                  f"{log.name} assigned")  # fmt: skip
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        driver = _browser(1200, 1600)
        driver.get(url)
        _wait(lambda: not driver.find_element("id", "shared-section").get_attribute("hidden"),
              60, "the shared-model panel")  # fmt: skip
        _wait(lambda: int(_text(driver, "sm-version").replace(",", "") or 0) >= 1, 120,
              "a first mixture")  # fmt: skip
        first = int(_text(driver, "sm-version").replace(",", ""))
        _wait(lambda: int(_text(driver, "sm-version").replace(",", "")) >= first + 2, 120,
              "the version advancing")  # fmt: skip
        workers = _wait(
            lambda: (got := driver.find_element("id", "sm-workers").get_attribute(
                "data-workers")) and sorted(got.split(",")) == ["w0", "w1", "w2"] and got,
            120, "all three workers listed",
        )  # fmt: skip
        assert workers
        state = _state(url)
        shared = state["shared_model"]
        assert shared["worker"] == "w0" and shared["group_size"] == 3
        listed = {w["worker"]: w["partitions"] for w in shared["workers"]}
        assert sorted(listed) == ["w0", "w1", "w2"]
        partitions = sorted(p for rows in listed.values() for _, p, _, _ in rows)
        assert partitions == list(range(PARTITIONS))  # each partition under one worker
        assert sorted(p for _, p in shared["owned"]) == sorted(p for _, p, _, _ in listed["w0"])
        assert all(lag is not None for _, _, _, lag in listed["w0"])  # its own: lag known
        assert [v for _, v in shared["versions"]] == sorted(v for _, v in shared["versions"])
        shown = driver.find_elements("css selector", "#sm-workers tr")
        assert len(shown) == PARTITIONS
        assert "(this one)" in _text(driver, "sm-workers")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        driver.save_screenshot(str(tmp_path / "shared-model-page.png"))
        # outside shared mode the panel is absent: shown by the single-run page test's state
    finally:
        stop.set()
        if driver is not None:
            driver.quit()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except Exception:  # noqa: BLE001 - a stuck worker is killed
                p.kill()
