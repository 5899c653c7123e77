"""The live page in a real browser (Debian's chromium, driven by Selenium): it follows a run
that is slow enough to watch, shows the numbers /api/state and the summary hold, has no
JavaScript error, fits a phone's width, and cannot change anything."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import needs
import numpy as np
import pytest
from cli_helpers import CLI, switching_examples, to_csv

from stream_perceptron.example_data import write_dataset

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
DOCS = Path(__file__).resolve().parents[2] / "docs"

pytestmark = pytest.mark.browser


def _phishing_csv() -> list[bytes]:
    import io

    out = io.StringIO()
    write_dataset("phishing", "csv", out, "y")
    return out.getvalue().encode().splitlines(keepends=True)


def _browser(width: int, height: int):
    needs.require("browser")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _text(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


@pytest.fixture
def slow_run(tmp_path):
    """``run --ui`` on the Phishing data set fed at about 500 lines/s once the test calls the
    yielded ``start`` (after its browser has the page: a browser slow to start on a loaded
    machine must not miss the live part); yields (url, summary, start)."""
    lines = _phishing_csv()
    summary = tmp_path / "summary.json"
    proc = subprocess.Popen(
        [*CLI, "run", "--format", "csv", "--ui", "--ui-linger", "120",
         "--checkpoint", str(tmp_path / "ck.json"), "--checkpoint-every", "200",
         "--summary-json", str(summary)],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None

    go = threading.Event()

    def feed() -> None:
        go.wait(120)
        try:
            for i in range(0, len(lines), 25):
                proc.stdin.write(b"".join(lines[i : i + 25]))
                proc.stdin.flush()
                time.sleep(0.05)
            proc.stdin.close()
        except BrokenPipeError:
            pass

    first = proc.stderr.readline().decode()
    match = re.search(r"live page on (http://\S+/)", first)
    assert match, first
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield match.group(1), summary, go.set
    finally:
        go.set()
        proc.kill()
        proc.wait(timeout=30)


def test_the_page_follows_the_run_and_agrees_with_the_api_and_the_summary(slow_run, tmp_path):
    url, summary, start = slow_run
    driver = _browser(1200, 1400)
    try:
        driver.get(url)
        start()
        # the mistake curve grows while the stream runs
        _wait(lambda: int(driver.find_element("id", "curve").get_attribute("data-points")) >= 10,
              30, "10 points on the mistake curve")  # fmt: skip
        assert _text(driver, "status") == "live"
        _wait(lambda: _text(driver, "status") == "stream ended", 60, "the end of the stream")
        time.sleep(1.5)  # one more poll after the end
        state = json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())
        done = json.loads(summary.read_text())
        counts = state["counts"]
        assert counts["learned"] == done["learned"] == 1250
        assert counts["mistakes"] == done["mistakes"]
        assert _text(driver, "learned") == f"{done['learned']:,}"
        assert _text(driver, "mistakes") == f"{done['mistakes']:,}"
        assert _text(driver, "accuracy") == f"{100 * done['accuracy']:.2f} %"
        assert "Perceptron(lr=1, bias=learned" in _text(driver, "watching")
        assert state["shared_model"] is None  # not in shared-model mode: no group panel
        assert driver.find_element("id", "shared-section").get_attribute("hidden")
        assert state["join"] is None  # no --join-key: no part for labels that come later
        assert driver.find_element("id", "join-section").get_attribute("hidden")
        assert "saved" in _text(driver, "checkpoint")
        shown = driver.find_elements("css selector", "#weights tr")
        assert len(shown) == len(state["model"]["weights"]) > 0
        assert int(driver.find_element("id", "curve").get_attribute("data-points")) == len(
            state["curve"]
        )
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        driver.save_screenshot(str(tmp_path / "live-page.png"))
        if os.environ.get("STREAM_PERCEPTRON_UPDATE_SCREENSHOT"):
            DOCS.mkdir(exist_ok=True)
            driver.save_screenshot(str(DOCS / "live-page.png"))
        # a phone's width: nothing wider than the screen
        driver.set_window_size(390, 844)
        deadline = time.monotonic() + 10  # the page lays itself out again on resize (a busy
        while True:  # machine can take seconds)
            overflow = driver.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"
            )
            if overflow <= 0 or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        wide = driver.execute_script(
            "return [...document.querySelectorAll('body *')].filter(e => "
            "e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5"
            " || e.scrollWidth > e.clientWidth + 0.5).map(e => "
            "e.tagName + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right) + ' ' "
            "+ e.scrollWidth + '/' + e.clientWidth).slice(0, 12).concat(["
            "document.documentElement.scrollWidth, document.documentElement.clientWidth, "
            "window.innerWidth, document.body.scrollWidth, window.outerWidth])"
        )
        assert overflow <= 0, wide
        driver.save_screenshot(str(tmp_path / "live-page-phone.png"))
    finally:
        driver.quit()


def test_nothing_can_be_changed_from_the_browser(slow_run):
    url, _, _ = slow_run
    for path in ("", "api/state", "metrics"):
        for method in ("POST", "PUT", "DELETE"):
            request = urllib.request.Request(url + path, data=b"{}", method=method)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 405


@contextlib.contextmanager
def _page_after(data: bytes, *flags: str):
    """``run --ui`` over ``data`` (CSV on stdin, all of it at once, the page lingering after the
    stream ends) and a browser on its page; yields (url, driver)."""
    proc = subprocess.Popen(
        [*CLI, "run", "--format", "csv", *flags, "--ui", "--ui-linger", "120"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    first = proc.stderr.readline().decode()
    match = re.search(r"live page on (http://\S+/)", first)
    assert match, first
    url = match.group(1)
    driver = None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
        driver = _browser(1200, 1400)
        driver.get(url)
        yield url, driver
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
    finally:
        if driver is not None:
            driver.quit()
        proc.kill()
        proc.wait(timeout=30)


def _ended_state(url: str, driver) -> dict:
    """The API's document once the stream ended and the page drew it."""
    _wait(lambda: _text(driver, "status") == "stream ended", 60, "the end of the stream")
    time.sleep(1.5)  # the page polls every second: one more poll after the end
    return json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())


def test_the_page_marks_a_drift_on_the_curve(tmp_path):
    """--drift-detector adwin (the default): labels inverted at example 20,000; the curve shows a
    mark there."""
    data = to_csv(switching_examples(30_000, 20_000))
    with _page_after(data, "--averaged") as (url, driver):
        curve = driver.find_element("id", "curve")
        _wait(lambda: int(curve.get_attribute("data-drifts") or 0) >= 1, 60, "a drift mark")
        state = json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())
        assert 20_000 < state["drifts"][0] <= 21_000
        marks = driver.find_elements("css selector", "#curve-drifts line")
        assert len(marks) == len(state["drifts"])
        # the mark stands where the curve's x axis puts example drifts[0]
        xmax = max(p[0] for p in state["curve"])
        assert float(marks[0].get_attribute("x1")) == pytest.approx(
            40 + 350 * state["drifts"][0] / xmax, abs=0.1
        )


def test_on_a_noisy_stream_the_page_shows_the_margins_and_says_the_bound_bounds_nothing(tmp_path):
    data = to_csv(switching_examples(5_000, None))  # 5 % of the labels flipped
    with _page_after(data) as (url, driver):
        state = _ended_state(url, driver)
        m = state["model"]
        assert m["mistake_bound"] is None and m["wrong_side"] > 0
        words = driver.find_element("id", "bound-words")
        assert words.get_attribute("data-case") == "not-separable"
        assert f"{100 * m['wrong_side']:.2f} %" in words.text and "bounds nothing" in words.text
        assert _text(driver, "wrong-side") == f"{100 * m['wrong_side']:.2f} %"
        # the histogram: one bar per bin, red left of 0, the zero line between its ends
        hist = m["margin_histogram"]
        bars = driver.find_elements("css selector", "#margins-bars rect")
        assert len(bars) == len(hist["counts"]) == 20
        tallest = max(hist["counts"])
        for bar, n, right in zip(bars, hist["counts"], hist["edges"][1:]):
            assert float(bar.get_attribute("height")) == pytest.approx(80 * n / tallest, abs=0.1)
            assert bar.get_attribute("fill") == ("#fca5a5" if right <= 0 else "#93c5fd")
        assert driver.find_element("id", "margins-zero").get_attribute("visibility") == "visible"
        assert driver.find_element("id", "curve").get_attribute("data-bound") == ""
        assert _text(driver, "curve-bound-label") == ""
        driver.save_screenshot(str(tmp_path / "noisy.png"))


def test_on_a_separable_stream_the_page_draws_the_bound_beside_the_mistakes(tmp_path):
    """Two features, labelled by x1 + x2 > 0 with every example at least 0.3 from the line: the
    perceptron converges, the recent window is all on the right side, and the page shows
    (R/γ)², in words and as a line on the curve when it fits."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(8_000, 2))
    X = X[np.abs(X.sum(axis=1)) / np.sqrt(2) >= 0.3][:3_000]
    data = to_csv([({"a": float(a), "b": float(b)}, int(a + b > 0)) for a, b in X])
    with _page_after(data) as (url, driver):
        state = _ended_state(url, driver)
        m, mistakes = state["model"], state["counts"]["mistakes"]
        assert m["wrong_side"] == 0 and m["mistake_bound"] is not None
        bound = round(m["mistake_bound"])
        words = driver.find_element("id", "bound-words")
        assert words.get_attribute("data-case") == "separable"
        assert f"{bound:,}" in words.text and f"So far: {mistakes:,}" in words.text
        # a line on the curve when within 10x the mistakes, else named above it
        drawn = bound <= 10 * max(1, mistakes)
        assert driver.find_element("id", "curve").get_attribute("data-bound") == (
            str(bound) if drawn else ""
        )
        line = driver.find_element("id", "curve-bound")
        assert line.get_attribute("visibility") == ("visible" if drawn else "hidden")
        label = _text(driver, "curve-bound-label")
        assert label.startswith(f"(R/γ)² = {bound:,}") and drawn != ("above the chart" in label)
        driver.save_screenshot(str(tmp_path / "separable.png"))


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url + "metrics", timeout=10).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _histogram_quantile(q: float, cumulative: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over ``[(le, cumulative count), ...]`` (+Inf last)."""
    rank = q * cumulative[-1][1]
    for i, (le, n) in enumerate(cumulative):
        if n >= rank:
            if le == float("inf"):
                return cumulative[-2][0]
            if i == 0 and le <= 0:
                return le
            lower, below = (0.0, 0.0) if i == 0 else cumulative[i - 1]
            return lower + (le - lower) * (rank - below) / (n - below)
    raise AssertionError("no bucket holds the rank")


def test_the_page_shows_the_join_as_the_engine_counts_it(tmp_path):
    """--join-key on the delayed Phishing stream (outcomes 0-100 events after their events,
    some past --label-wait 150), with duplicate events and outcomes and a lonely event at the
    end: the page's "labels that come later" part holds the numbers the engine's /metrics
    gives, the delay quantiles as histogram_quantile makes them of its buckets."""
    out = io.StringIO()
    write_dataset("phishing", "csv", out, "y", delayed=True)
    features = out.getvalue().split("\n", 1)[0].count(",") - 1  # id, features..., y
    event, outcome = "{},0.5" + ",0.0" * (features - 1) + ",", "{}" + "," * (features + 1) + "1"
    extra = [*[event.format("dupe")] * 3, *[outcome.format("dupe")] * 2, event.format("lonely")]
    data = (out.getvalue() + "\n".join(extra) + "\n").encode()
    with _page_after(data, "--join-key", "id", "--label-wait", "150") as (url, driver):
        state = _ended_state(url, driver)
        got = _scrape(url)
        assert state["counts"]["invalid"] == {}  # every extra line is read as meant
        assert not driver.find_element("id", "join-section").get_attribute("hidden")

        def total(name: str) -> int:
            return int(got[(f"stream_perceptron_{name}_total", ())])

        pending = {kind: int(got[("stream_perceptron_pending_examples", (("kind", kind),))])
                   for kind in ("event", "outcome")}  # fmt: skip
        shown = {
            "join-events": pending["event"],
            "join-outcomes": pending["outcome"],
            "join-joined": total("joined_examples"),
            "join-expired": total("expired_events"),
            "join-unmatched": total("unmatched_outcomes"),
            "join-dup-outcomes": total("duplicate_outcomes"),
            "join-dup-events": total("duplicate_events"),
        }
        for element, value in shown.items():
            assert _text(driver, element) == f"{value:,}", element
        # the stream has of each: what was learned, dropped, refused and left waiting
        assert all(shown.values()), shown
        assert (shown["join-dup-events"], shown["join-dup-outcomes"]) == (2, 1)
        served = got[("stream_perceptron_served_accuracy", ())]
        assert _text(driver, "join-served") == f"{100 * served:.2f} %"
        limit = got[("stream_perceptron_pending_examples_limit", ())]
        assert _text(driver, "join-fill") == f"{100 * sum(pending.values()) / limit:.2f} %"
        name = "stream_perceptron_label_delay_records"
        cumulative = sorted(
            (float(dict(labels)["le"]), n) for (metric, labels), n in got.items()
            if metric == f"{name}_bucket"
        )  # fmt: skip
        assert cumulative[-1][1] == total("joined_examples")
        for element, q in (("join-delay-median", 0.5), ("join-delay-p90", 0.9)):
            expected = _histogram_quantile(q, cumulative)
            assert float(_text(driver, element)) == pytest.approx(expected, abs=0.051), element
        mean = got[(f"{name}_sum", ())] / got[(f"{name}_count", ())]
        assert float(_text(driver, "join-delay-mean")) == pytest.approx(mean, abs=0.051)
        assert state["join"]["max_pending"] == limit
        assert f"each at most {150:,} records" in _text(driver, "join-words")
        driver.save_screenshot(str(tmp_path / "join.png"))
