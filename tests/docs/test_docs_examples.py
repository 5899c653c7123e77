"""Every command and code example of README.md and docs/*.md runs (docs_examples.py: how).

Broke it to watch it fail: a flag misspelt in a docs/stdin.md example (``--checkpoint-evry``)
fails its ``run`` test (exit 2, usage error), a block without a language mode or a ``skip``
without a reason fails ``test_every_example_has_a_known_mode``, and a metric name misspelt in
the PromQL example fails its ``promql`` test.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from docs_examples import MODES, REPO, Example, examples

BIN = Path(sys.executable).parent
EXAMPLES = examples()
TIMEOUT = 120


def _of(*modes: str) -> list:
    return [pytest.param(e, id=e.id) for e in EXAMPLES if e.mode in modes]


def test_every_example_has_a_known_mode():
    assert EXAMPLES, "no example found"
    for e in EXAMPLES:
        assert e.mode in MODES, f"{e.id}: mode {e.mode!r} is none of {sorted(MODES)}"
        if e.mode == "skip":
            assert len(e.why) > 20, f"{e.id}: a skipped example says why and what covers it"
        if e.mode in ("run", "serve", "kafka"):
            assert e.lang == "sh", f"{e.id}: {e.mode} is for shell blocks"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the examples name: Phishing as CSV (label ``y``) and JSON lines."""
    d = tmp_path_factory.mktemp("docs-data")
    cli = str(BIN / "stream-perceptron")
    procs = []
    for name, fmt in (("data.csv", "csv"), ("events.jsonl", "jsonl")):
        with (d / name).open("wb") as out:
            procs.append(subprocess.Popen([cli, "example-data", "phishing", "--format", fmt],
                                          stdout=out))  # fmt: skip
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    shutil.copy(d / "data.csv", d / "events.csv")
    return d


def _workdir(data_dir: Path, tmp_path: Path) -> Path:
    for f in data_dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("KAFKA_STATE_DIR", None)
    return env


def _bash(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in its own session; on the timeout, end the whole session (pipelines)."""
    proc = subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + code], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n(killed after {TIMEOUT} s)"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("example", _of("run"))
def test_shell_example_runs(example: Example, data_dir: Path, tmp_path: Path):
    proc = _bash(example.code, _workdir(data_dir, tmp_path))
    assert proc.returncode == 0, f"{example.id}: exit {proc.returncode}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("example", _of("serve"))
def test_serving_example_serves(example: Example, data_dir: Path, tmp_path: Path):
    cwd = _workdir(data_dir, tmp_path)
    proc = subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + example.code], cwd=cwd,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    seen: list[str] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if re.search(r"live page on http://127\.0\.0\.1:\d+/", line):
                break
            assert time.monotonic() < deadline, f"{example.id}: no address within {TIMEOUT} s"
        else:
            ended = f"ended without serving (exit {proc.wait()})"
            pytest.fail(f"{example.id}: {ended}\n{''.join(seen)}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    # every process of the example ends on SIGTERM (a `run --ui` once served on: session 26)
    deadline = time.monotonic() + 20
    while (left := _alive_in_group(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{example.id}: still running 20 s after SIGTERM: {left}")


def _alive_in_group(pgid: int) -> list[str]:
    """The command lines of the live (not zombie) processes of process group ``pgid``."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes()
                alive.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return alive


def _kafka_script(code: str, bootstrap: str, suffix: str) -> tuple[str, set[str]]:
    """The block as run against the suite's broker; and the topics it reads and never writes."""
    lines = [ln for ln in code.split("\n") if not re.match(r"\s*make kafka-(up|down)\b", ln)]
    code = "\n".join(lines)
    for placeholder in ("HOST:PORT", "127.0.0.1:PORT", "kafka:9092"):
        code = code.replace(placeholder, bootstrap)
    names = r"(--(?:topic|labels-topic|group|model-topic|predictions-topic|dead-letter-topic)|-t)"
    code = re.sub(names + r" ([\w.-]+)", lambda m: f"{m[1]} {m[2]}-{suffix}", code)
    ends = r"\1 --exit-at-end --metrics-port 0"
    code = re.sub(r"(stream-perceptron run --source kafka)", ends, code)
    read = set(re.findall(r"--(?:topic|labels-topic) ([\w.-]+)", code))
    written = set(re.findall(r"kcat -P[^\n]* -t ([\w.-]+)", code))
    return code, read - written


@pytest.mark.parametrize("example", _of("kafka"))
def test_kafka_example_runs(example: Example, kafka_bootstrap: str, data_dir: Path,
                            tmp_path: Path):  # fmt: skip
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    code, to_make = _kafka_script(example.code, kafka_bootstrap, uuid.uuid4().hex[:8])
    if to_make:
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        try:
            admin.create_topics([NewTopic(t, 1, 1) for t in sorted(to_make)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        for t in sorted(to_make):
            for line in (data_dir / "events.jsonl").read_bytes().splitlines():
                producer.send(t, line)
        producer.flush()
        producer.close()
    proc = _bash(code, _workdir(data_dir, tmp_path))
    assert proc.returncode == 0, (
        f"{example.id}: exit {proc.returncode}\n{code}\n{proc.stderr[-3000:]}")


@pytest.mark.parametrize("example", _of("python"))
def test_python_example_runs(example: Example):
    if ">>>" in example.code:
        test = doctest.DocTestParser().get_doctest(example.code, {}, example.id, str(example.page),
                                                   example.line)  # fmt: skip
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.failures == 0, f"{example.id}: {runner.failures} doctest failures"
    else:
        exec(compile(example.code, example.id, "exec"), {})


def _promql():
    spec = importlib.util.spec_from_file_location("_docs_promql", REPO / "tests/deploy/promql.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", _of("promql"))
def test_promql_example_names_engine_metrics(example: Example):
    promql = _promql()
    used = promql.metric_names(example.code)
    assert used, f"{example.id}: no metric name found"
    assert used <= promql.ENGINE_METRICS, f"{example.id}: {used - promql.ENGINE_METRICS}"
