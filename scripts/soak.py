#!/usr/bin/env python3
"""``make soak TEST=path::name N=10``: run a pytest selection N times in a row beside two
busy-loop CPU hogs (a loaded CI machine) and print, per test, its passes and its slowest run.

Every run's output and JUnit XML are kept under ``SOAK_DIR`` (default ``.soak/<time>``), so
a failure seen once in N runs can be read afterwards. The shared-model tests' figures of
every run, passed or not, go to ``mixing.log`` there (``STREAM_PERCEPTRON_TEST_MIXING_LOG``),
and the largest held-out gap and share of the way to unmixed are printed per test at the
end: how near its bound a test runs, not only whether it failed. ``TEST`` is anything pytest
selects: a test, a file, a folder, ``-m kafka``; ``PYTEST_ARGS`` adds options (``-n 2``,
``-x``, ...). ``pressure.log`` there has, per second, how long tasks waited for CPU, memory
and I/O (the kernel's pressure stall information, when it has it): a stall of seconds shows
there as memory or CPU pressure, or as neither.
Exit 0 when every run of every test passed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _hog() -> None:
    while True:
        pass


#: a sleep this much late is a stall (as tests/evidence.py's sleeper counts)
STALL_S = 2.0


class MachineWatch:
    """A thread of the soak's own process (in the hogs' session) that sleeps 0.25 s at a time
    and notes each time it woke more than :data:`STALL_S` late. Failed runs met stalls of
    10-52 s in the test processes' sleepers and the brokers' JVMs (their safepoint logs silent
    together); whether this process stood still as well tells a stall of the whole machine
    from the starving of some processes (soak 35c: a test's sleeper stood still 33.8 s while
    this watch never woke 2 s late). A run's line says what it saw.

    With ``cpu``, the thread runs on that CPU only: one such watch per CPU tells a CPU that
    stood still (the hypervisor not running it: each of its processes waits, the other CPU's
    go on) from processes the kernel starved (both watches on time)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 cpu: int | None = None) -> None:  # fmt: skip
        self.stalls: list[tuple[float, float]] = []  # (wall clock at its start, seconds)
        self._clock, self._wall, self.cpu = clock, wall, cpu
        self.name = "the soak" if cpu is None else f"CPU {cpu}'s watch"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)

    def start(self) -> MachineWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        if self.cpu is not None:
            os.sched_setaffinity(0, {self.cpu})  # 0: this thread
        while True:
            before = self._clock()
            if self._stop.wait(0.25):
                return
            self.note(self._clock() - before - 0.25)

    def note(self, late: float) -> None:
        """Note a wake-up ``late`` seconds late (a stall when over :data:`STALL_S`)."""
        if late > STALL_S:
            self.stalls.append((self._wall() - late, late))

    def summary(self, since: float, until: float) -> str:
        """The stalls that began within ``since``..``until`` (wall clock), in words.

        >>> w = MachineWatch(wall=lambda: 100.0)
        >>> w.note(1.0); w.note(51.0); w.note(3.5)
        >>> w.summary(0.0, 200.0)
        'the soak stood still 2 times over 2 s, 54.5 s in all, the longest 51.0 s'
        >>> w.summary(0.0, 10.0)
        'the soak never stood still over 2 s'
        """
        seen = [late for start, late in self.stalls if since <= start <= until]
        if not seen:
            return f"{self.name} never stood still over {STALL_S:g} s"
        return (f"{self.name} stood still {len(seen)} times over {STALL_S:g} s, {sum(seen):.1f} "
                f"s in all, the longest {max(seen):.1f} s")  # fmt: skip


PRESSURE = Path("/proc/pressure")


def _stall_totals() -> dict[str, int]:
    """The kernel's running totals of stalled time (microseconds) by kind and scope:
    ``cpu.some``, ``cpu.full``, ``memory.some``, ``memory.full``, ``io.some``, ``io.full``."""
    totals = {}
    for kind in ("cpu", "memory", "io"):
        for line in (PRESSURE / kind).read_text().splitlines():
            scope, *fields = line.split()
            totals[f"{kind}.{scope}"] = int(fields[-1].removeprefix("total="))
    return totals


def _sample_pressure(path: Path, stop: threading.Event, every: float = 1.0) -> None:
    """Append to ``path``, each ``every`` seconds, the milliseconds of stall of each kind
    since the last line (``time cpu.some cpu.full memory.some ...``)."""
    try:
        last = _stall_totals()
    except OSError:  # a kernel without PSI
        return
    with path.open("a", buffering=1) as out:
        out.write(f"# {' '.join(['time', *last])} (ms stalled in each {every:g} s)\n")
        while not stop.wait(every):
            now = _stall_totals()
            spent = " ".join(str((now[k] - last[k]) // 1000) for k in now)
            out.write(f"{time.strftime('%H:%M:%S')} {spent}\n")
            last = now


def _outcomes(junit: Path) -> dict[str, tuple[str, float]]:
    """test id -> (passed/failed/skipped/error, seconds) of one run."""
    out: dict[str, tuple[str, float]] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
            elif child.tag == "skipped":
                state = "skipped"
        out[name] = (state, float(case.get("time", 0.0)))
    return out


#: the figures of :func:`shared_model_helpers.measured` lines: "<name> <number>"
_FIGURES = (("held-out gap", re.compile(r"gap (-?[0-9.]+)")),
            ("of the way to never mixing", re.compile(r"(-?[0-9.]+) of the way")))  # fmt: skip


def _largest_figures(mixing_log: Path) -> dict[tuple[str, str], tuple[float, int]]:
    """(test id, figure) -> (largest value, how many) in a soak's mixing log."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if not mixing_log.exists():
        return out
    for line in mixing_log.read_text(errors="replace").splitlines():
        test, _, text = line.partition(": ")
        for name, pattern in _FIGURES:
            if found := pattern.search(text):
                value = float(found.group(1))
                largest, count = out.get((test, name), (value, 0))
                out[(test, name)] = (max(largest, value), count + 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test", help="what pytest selects (a test id, file or folder)")
    parser.add_argument("-n", "--runs", type=int, default=10, help="runs in a row (10)")
    parser.add_argument("--hogs", type=int, default=2, help="busy-loop CPU hogs beside (2)")
    parser.add_argument("--dir", type=Path, default=None, help="where each run's log is kept")
    parser.add_argument("--pytest-args", default="", help="more pytest options")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    out_dir = args.dir or REPO / ".soak" / time.strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    mixing_log = Path(os.environ.get("STREAM_PERCEPTRON_TEST_MIXING_LOG") or out_dir / "mixing.log")
    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    watches = [MachineWatch().start()]
    watches += [MachineWatch(cpu=cpu).start() for cpu in sorted(os.sched_getaffinity(0))]
    stop_sampling = threading.Event()
    sampler = threading.Thread(
        target=_sample_pressure, args=(out_dir / "pressure.log", stop_sampling), daemon=True
    )
    sampler.start()
    results: dict[str, list[tuple[str, float]]] = defaultdict(list)
    walls: list[float] = []
    try:
        for i in range(1, args.runs + 1):
            junit, log = out_dir / f"run{i}.xml", out_dir / f"run{i}.log"
            # a failed run's tmp dirs (worker logs, model topic records, the broker's log) are
            # kept here: pytest deletes all but its last three base temp dirs
            tmp = out_dir / f"run{i}-tmp"
            cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
                   f"--junitxml={junit}", f"--basetemp={tmp}", *shlex.split(args.pytest_args),
                   *shlex.split(args.test)]  # fmt: skip
            started, began = time.monotonic(), time.time()
            env = {**os.environ, "PYTHONUNBUFFERED": "1",
                   "STREAM_PERCEPTRON_TEST_MIXING_LOG": str(mixing_log)}  # fmt: skip
            with log.open("wb") as f:
                code = subprocess.call(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, env=env)
            walls.append(time.monotonic() - started)
            run = _outcomes(junit)
            for name, outcome in run.items():
                results[name].append(outcome)
            failed = sorted(n for n, (s, _) in run.items() if s == "failed")
            if code == 0:
                shutil.rmtree(tmp, ignore_errors=True)
            print(f"run {i}/{args.runs}: exit {code}, {walls[-1]:.1f} s, "
                  f"{len(run) - len(failed)} of {len(run)} passed or skipped"
                  + (f"; failed: {', '.join(failed)} (log: {log})" if failed else "")
                  + "; " + "; ".join(w.summary(began, time.time()) for w in watches),
                  flush=True)  # fmt: skip
            if not run:
                print(f"  no test ran: see {log}", flush=True)
    finally:
        for w in watches:
            w.stop()
        stop_sampling.set()
        for h in hogs:
            h.terminate()
    print(f"\n{args.runs} runs of {args.test} beside {args.hogs} CPU hogs (logs in {out_dir})")
    print("| test | passed | slowest s |")
    print("| --- | --- | --- |")
    bad = False
    for name in sorted(results):
        runs = results[name]
        passed = sum(s == "passed" for s, _ in runs)
        skipped = sum(s == "skipped" for s, _ in runs)
        bad |= passed + skipped < args.runs or len(runs) < args.runs
        note = f" ({skipped} skipped)" if skipped else ""
        print(f"| {name} | {passed}/{args.runs}{note} | {max(t for _, t in runs):.1f} |")
    print(f"slowest whole run: {max(walls):.1f} s")
    figures = _largest_figures(mixing_log)
    if figures:
        print(f"\nthe shared-model tests' figures, largest of each ({mixing_log}):")
        print("| test | figure | largest | runs |")
        print("| --- | --- | --- | --- |")
        for (test, name), (largest, count) in sorted(figures.items()):
            print(f"| {test} | {name} | {largest:g} | {count} |")
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
