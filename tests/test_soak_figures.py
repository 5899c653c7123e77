"""``scripts/soak.py``'s figures: what the shared-model tests' ``measured()`` lines said in every
run of a soak, the largest of each per test (how near its bound a test runs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


soak = _load("soak", ROOT / "scripts" / "soak.py")
helpers = _load("shared_model_helpers", ROOT / "tests" / "kafka" / "shared_model_helpers.py")


def test_the_largest_figure_of_each_test_from_what_measured_wrote(tmp_path, monkeypatch):
    log = tmp_path / "mixing.log"
    monkeypatch.setenv("STREAM_PERCEPTRON_TEST_MIXING_LOG", str(log))
    said = {
        "tests/kafka/a.py::t[kafka-python] (call)": [
            "held-out: pulled 0.8818, sequential 0.9140, gap 0.0323",
            "held-out: pulled 0.9100, sequential 0.9140, gap 0.0040",
            "group mistakes 900; one sequential model 800, 3 never mixing 1000: 0.50 of the way"
            " to never mixing",
        ],
        "tests/kafka/b.py::u (call)": [
            "held-out: pulled 0.9200, sequential 0.9140, gap -0.0060",
            "mixing cadence: 21 mixtures of 24 due",
        ],
    }
    for test, lines in said.items():
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        for line in lines:
            helpers.measured(line)
    assert soak._largest_figures(log) == {
        ("tests/kafka/a.py::t[kafka-python]", "held-out gap"): (0.0323, 2),
        ("tests/kafka/a.py::t[kafka-python]", "of the way to never mixing"): (0.5, 1),
        ("tests/kafka/b.py::u", "held-out gap"): (-0.006, 1),
    }
    assert soak._largest_figures(tmp_path / "none.log") == {}


def test_the_watch_notes_a_wake_up_that_came_late_as_a_stall():
    import time

    # a clock that jumps 5.3 s over the first sleep of 0.25 s, then keeps time
    ticks = iter([0.0, 5.3, *(10.0 + 0.25 * i for i in range(10_000))])
    watch = soak.MachineWatch(clock=lambda: next(ticks), wall=lambda: 1000.0).start()
    time.sleep(0.7)
    watch.stop()
    late = 5.3 - 0.25
    assert watch.stalls == [(1000.0 - late, late)]
    assert watch.summary(0.0, 2000.0) == (
        f"the soak stood still 1 times over 2 s, {late:.1f} s in all, the longest {late:.1f} s"
    )
    assert watch.summary(0.0, 900.0) == "the soak never stood still over 2 s"  # before it


def test_a_watch_on_one_cpu_runs_there_and_says_so():
    import os
    import time

    cpu = max(os.sched_getaffinity(0))
    seen: list[set[int]] = []
    watch = soak.MachineWatch(cpu=cpu)
    note = watch.note

    def noting(late: float) -> None:  # where the watch's thread runs, each time it wakes
        seen.append(os.sched_getaffinity(0))
        note(late)

    watch.note = noting  # type: ignore[method-assign]
    watch.start()
    time.sleep(0.6)
    watch.stop()
    assert seen and all(s == {cpu} for s in seen)
    assert os.sched_getaffinity(0) != {cpu} or len(os.sched_getaffinity(0)) == 1  # ours unpinned
    assert watch.summary(0.0, time.time()) == f"CPU {cpu}'s watch never stood still over 2 s"


def test_pressure_lines_hold_each_seconds_stall_by_kind(tmp_path, monkeypatch):
    import threading
    import time

    kinds = {"cpu": [10_000, 0], "memory": [0, 0], "io": [5_000, 2_000]}  # some, full (us)

    def write() -> None:
        for kind, (some, full) in kinds.items():
            (tmp_path / kind).write_text(
                f"some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n"
                f"full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n"
            )

    write()
    monkeypatch.setattr(soak, "PRESSURE", tmp_path)
    log, stop = tmp_path / "pressure.log", threading.Event()
    sampler = threading.Thread(target=soak._sample_pressure, args=(log, stop, 0.2))
    sampler.start()
    while not log.exists() or not log.read_text():  # the header: the first totals read
        time.sleep(0.01)
    kinds["memory"] = [3_000_000, 1_000_000]  # then 3 s of memory stall, 1 s of it full
    write()
    while len(log.read_text().splitlines()) < 2:
        time.sleep(0.05)
    stop.set()
    sampler.join()
    header, first = log.read_text().splitlines()[:2]
    assert header.split()[1:8] == [
        "time", "cpu.some", "cpu.full", "memory.some", "memory.full", "io.some", "io.full"
    ]  # fmt: skip
    assert first.split()[1:] == ["0", "0", "3000", "1000", "0", "0"]
