"""An existing checkpoint is never silently replaced by a new model: --resume or --fresh."""

from __future__ import annotations

from cli_helpers import binary_examples, model_of, run_cli, to_csv

DATA = to_csv(binary_examples(300, seed=5))


def test_an_existing_checkpoint_without_resume_is_refused(tmp_path):
    ck = tmp_path / "model.json"
    first = run_cli("run", "--format", "csv", "--checkpoint", str(ck), stdin=DATA)
    assert first.returncode == 0, first.stderr.decode()
    saved = ck.read_bytes()
    again = run_cli("run", "--format", "csv", "--checkpoint", str(ck), stdin=DATA)
    assert again.returncode == 2
    message = again.stderr.decode()
    assert "exists" in message and "--resume" in message and "--fresh" in message
    assert ck.read_bytes() == saved  # untouched


def test_fresh_starts_a_new_model_and_resume_continues(tmp_path):
    ck = tmp_path / "model.json"
    assert run_cli("run", "--format", "csv", "--checkpoint", str(ck), stdin=DATA).returncode == 0
    resumed = run_cli("run", "--format", "csv", "--checkpoint", str(ck), "--resume", stdin=DATA)
    assert resumed.returncode == 0
    assert model_of(ck).n_seen == 600  # stdin is not skipped: both passes learned
    fresh = run_cli("run", "--format", "csv", "--checkpoint", str(ck), "--fresh", stdin=DATA)
    assert fresh.returncode == 0, fresh.stderr.decode()
    assert model_of(ck).n_seen == 300


def test_fresh_and_resume_together_or_without_a_checkpoint_are_usage_errors(tmp_path):
    ck = str(tmp_path / "model.json")
    both = run_cli("run", "--format", "csv", "--checkpoint", ck, "--fresh", "--resume", stdin=DATA)
    assert both.returncode == 2 and b"not both" in both.stderr
    alone = run_cli("run", "--format", "csv", "--fresh", stdin=DATA)
    assert alone.returncode == 2 and b"--fresh needs --checkpoint" in alone.stderr
