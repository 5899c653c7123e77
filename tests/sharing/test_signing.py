"""``--model-topic-key-file`` in one process: records signed with the group's key are taken,
any other is refused (``unsigned``, ``bad_signature``) before it is read; a well-formed,
plausible increment a stranger writes, which the checks alone would fold, changes nothing."""

from __future__ import annotations

import json
import os
import stat

import pytest
from model_topic_records import hostile_records
from test_model_view import _run
from test_shared_coordinator import MODEL_TOPIC, Cluster, _data

from connectors.kafka.model_log import LogRecord
from stream_perceptron import Perceptron
from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.sharing import Increment
from stream_perceptron.sharing.pull import pull_model
from stream_perceptron.sharing.records import RecordFormatError
from stream_perceptron.sharing.signing import HEADER, RecordSigner, load_key_file
from stream_perceptron.sharing.view import ModelView

KEY = b"k" * 32
OTHER = b"o" * 32


def _plausible_increment() -> tuple[bytes, bytes]:
    """An increment no worker wrote that passes every check of its content: small, finite,
    of the group's learner and hyperparameters."""
    seen = Perceptron(averaged=True)  # a model that has seen inputs of the group's norm
    for row in _data(1, 20)[0]:
        record = json.loads(row)
        seen.learn_one({"x": record["x"], "z": record["z"]}, record["y"])
    learned = ("weights", "bias", "avg_weights_acc", "avg_bias_acc", "classes")
    meta = {k: v for k, v in seen.get_state().items() if k not in learned}
    delta = {"n": 3, "classes": [{"label": None, "weights": [["x", 2.0], ["z", -2.0]],
                                  "bias": 1.0, "acc": [], "bias_acc": 0.0}]}  # fmt: skip
    increment = Increment("intruder", 1, 0, delta, meta)
    return increment.key.encode(), increment.encode()


def _current(cluster: Cluster, signer: RecordSigner | None) -> tuple[dict, ModelView]:
    view = ModelView(signer=signer)
    view.ingest([LogRecord(k, v, h) for k, v, h in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None
    return current[0], view


def _forged() -> list:
    key, value = _plausible_increment()
    wrong = RecordSigner(OTHER)
    hostile = hostile_records(Perceptron(averaged=True).get_state())
    return [
        (key, value, []),  # unsigned
        (key.replace(b":1", b":2"), value.replace(b'"seq": 1', b'"seq": 2'),
         wrong.headers(key.replace(b":1", b":2"), value.replace(b'"seq": 1', b'"seq": 2'))),
        *[(k, v, []) for k, v, _ in hostile],
    ]  # fmt: skip


def test_the_checks_alone_fold_a_plausible_stranger_increment() -> None:
    """The control: without the key, the forged increment is taken (so the key is what
    refuses it below)."""
    clean, forged = Cluster(), Cluster()
    _run(clean, [])
    _run(forged, _forged())
    want, _ = _current(clean, None)
    got, view = _current(forged, None)
    assert want["n_seen"] == 600
    # the leader folded it into a mixture (it is well-formed and plausible), and the
    # model is not the clean run's (the mixture after it was refused: the chain stalled)
    assert got != want, "the forgery changed nothing: the control cannot tell"
    assert view.mixture is not None and "intruder" in view.mixture.included


def test_with_the_key_only_the_groups_records_count() -> None:
    signer = RecordSigner(KEY)
    clean, forged = Cluster(), Cluster()
    _run(clean, [], signer)
    _run(forged, _forged(), signer)
    want, clean_view = _current(clean, signer)
    got, view = _current(forged, signer)
    assert clean_view.bad_records == 0  # every record the workers wrote is signed
    assert want["n_seen"] == got["n_seen"] == 600
    assert got == want  # the same model, to the last weight
    assert set(view.rejected) == {"unsigned", "bad_signature"}, view.rejected
    # the leader deleted the stranger's increments (readers without the key skip them too)
    deleted = {k for k, v, _ in forged.topics[MODEL_TOPIC] if v is None}
    assert {b"increment:intruder:1", b"increment:intruder:2"} <= deleted
    # pull-model with the key: the same; without it, the stranger's increment is folded
    records = [LogRecord(k, v, h) for k, v, h in forged.topics[MODEL_TOPIC]]

    class Log:
        def read_new(self):
            return records

    model, _, _, pulled = pull_model(Log(), signer)
    assert model.get_state() == Perceptron.from_state(want).get_state()
    assert pulled.rejected["unsigned"] > 0 and pulled.rejected["bad_signature"] > 0


def test_signatures_cover_key_value_and_tombstones() -> None:
    signer = RecordSigner(KEY)
    headers = signer.headers(b"increment:a:1", b"{}")
    signer.check(b"increment:a:1", b"{}", headers)
    for key, value in ((b"increment:a:2", b"{}"), (b"increment:a:1", b"{ }"),
                       (b"increment:a:1", None), (None, b"{}")):  # fmt: skip
        with pytest.raises(RecordFormatError) as refused:
            signer.check(key, value, headers)
        assert refused.value.reason == "bad_signature"
    tombstone = signer.headers(b"increment:a:1", None)
    signer.check(b"increment:a:1", None, tombstone)
    with pytest.raises(RecordFormatError) as refused:  # an empty value is not a tombstone
        signer.check(b"increment:a:1", b"", tombstone)
    assert refused.value.reason == "bad_signature"
    with pytest.raises(RecordFormatError) as refused:
        RecordSigner(OTHER).check(b"increment:a:1", b"{}", headers)
    assert refused.value.reason == "bad_signature"
    for bad in (None, [], [("other", b"x")], headers + headers, [(HEADER, "text")]):
        with pytest.raises(RecordFormatError) as refused:
            signer.check(b"increment:a:1", b"{}", bad)
        assert refused.value.reason in ("unsigned", "bad_signature")


def test_key_files(tmp_path, caplog) -> None:
    path = tmp_path / "key"
    path.write_bytes(KEY + b"\n")
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    signer = load_key_file(path)
    signer.check(b"m", b"v", RecordSigner(KEY).headers(b"m", b"v"))  # the newline dropped
    assert not caplog.records
    os.chmod(path, 0o644)
    with caplog.at_level("WARNING"):
        load_key_file(path)
    assert "chmod 600" in caplog.text
    path.write_bytes(b"short\n")
    with pytest.raises(ValueError, match="needs 32 or more"):
        load_key_file(path)
    with pytest.raises(OSError):
        load_key_file(tmp_path / "missing")
    with pytest.raises(ValueError):
        RecordSigner(b"x" * 31)
    from stream_perceptron.cli.kafka import model_topic_signer

    with pytest.raises(StreamPerceptronError, match="--model-topic-key-file"):
        model_topic_signer(str(path))
    assert model_topic_signer(None) is None
