"""Static membership (--instance-id): a worker killed with -9 and restarted takes its partitions
back at once, not after the group's session timeout."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from cli_helpers import CLI, binary_examples, model_of
from test_engine_kafka import _name, jsonl, kafka_args, make_topic, produce

SESSION_TIMEOUT_S = 30


def _args(bootstrap, topic, group, ck, preds, *extra, client):
    # A long session: without static membership a restart would wait it out.
    return kafka_args(
        bootstrap, topic, group, "--checkpoint", str(ck), "--resume",
        "--checkpoint-every", "2000", "--predictions", str(preds), *extra,
        client=client, session_ms=SESSION_TIMEOUT_S * 1000,
    )  # fmt: skip


def _lines(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_a_restarted_static_member_learns_again_well_before_the_session_timeout(
    kafka_bootstrap, tmp_path, kafka_client
):
    examples = binary_examples(150_000, d=8, seed=31)
    values = jsonl(examples)
    # Ten slices, two a round: one for the victim, one produced after its kill, so the
    # restarted worker always has new records to learn (with the fast client the victim alone
    # could otherwise reach the end, and the restart would have nothing to show).
    slices = [values[i : i + 15_000] for i in range(0, len(values), 15_000)]
    topic = make_topic(kafka_bootstrap, 2)
    ck, preds = tmp_path / "ck.json", tmp_path / "preds.jsonl"
    args = _args(kafka_bootstrap, topic, _name("group"), ck, preds, "--instance-id", "worker-0",
                 client=kafka_client)  # fmt: skip
    restarts = []
    for round_ in range(5):
        produce(kafka_bootstrap, topic, slices[2 * round_], 2)
        victim = subprocess.Popen([*CLI, *args], stderr=subprocess.DEVNULL)
        before = _lines(preds)
        deadline = time.monotonic() + 60
        while _lines(preds) <= before + 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        produce(kafka_bootstrap, topic, slices[2 * round_ + 1], 2)
        # Restart at once and time until learning goes on (a checkpoint's worth of new output).
        started = time.monotonic()
        again = subprocess.Popen([*CLI, *args], stderr=subprocess.DEVNULL)
        base = _lines(preds)
        while _lines(preds) <= base and time.monotonic() < started + 2 * SESSION_TIMEOUT_S:
            time.sleep(0.05)
        restarts.append(time.monotonic() - started)
        again.send_signal(signal.SIGKILL)
        again.wait(timeout=30)
    finish = subprocess.run(
        [*CLI, *args, "--exit-at-end"], capture_output=True, timeout=300, check=False
    )
    assert finish.returncode == 0, finish.stderr.decode()
    # Every restart learned again well under the session timeout (30 s).
    print("restart to learning again, seconds:", [round(r, 2) for r in restarts])
    assert max(restarts) < SESSION_TIMEOUT_S / 2, restarts
    state = json.loads(ck.read_text())
    assert state["stats"]["learned"] == 150_000
    assert model_of(ck).n_seen == 150_000
