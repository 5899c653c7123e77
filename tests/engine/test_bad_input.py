"""A hostile corpus: every kind of bad record, mixed with good ones."""

from __future__ import annotations

import base64
import json
from collections import Counter

from cli_helpers import binary_examples, model_of, run_cli

from stream_perceptron import Perceptron

GOOD = binary_examples(400, d=3, seed=7)


def _good_line(x, y) -> bytes:
    return json.dumps({**x, "y": y}).encode()


BAD: list[tuple[bytes, str]] = [
    (b'{"f0": 1.0, "y": 1', "invalid_json"),
    (b"[1, 2, 3]", "not_an_object"),
    (b'"just a string"', "not_an_object"),
    (b'{"f0": [1, 2], "y": 1}', "non_numeric_value"),
    (b'{"f0": {"nested": 1}, "y": 0}', "non_numeric_value"),
    (b'{"f0": NaN, "y": 1}', "non_finite_value"),
    (b'{"f0": Infinity, "y": 0}', "non_finite_value"),
    (b'{"f0": 1e999, "y": 1}', "non_finite_value"),
    (b'{"f0": 1.0, "y": "\xff\xfe"}', "invalid_utf8"),
    (b"\xc3\x28 garbage", "invalid_utf8"),
    (b'{"f0": 2.0, "y": 7}', "label_outside_encoding"),
    (b'{"f0": 2.0, "y": "maybe"}', "label_outside_encoding"),
    (b"", "empty_record"),
    (b'{"f0": ' + b"9" * 400 + b', "y": 1}', "value_too_large"),
    (b'{"f0": ' + b"[" * 1900 + b"]" * 1900 + b', "y": 1}', "too_deep"),
    (b'{"f0": 1.0, "y": 1e400}', "non_finite_value"),
    (b'{"f0": 1.0, "f0": 2.0, "y": 1}', "duplicate_feature"),
    (b'{"f0": 0.5, "pad": "' + b"a" * 5000 + b'", "y": 1}', "line_too_long"),
]


def _corpus() -> tuple[bytes, Counter]:
    lines, expected = [], Counter()
    bad = iter(BAD * 3)
    for i, (x, y) in enumerate(GOOD):
        lines.append(_good_line(x, y))
        if i % 9 == 4:
            value, reason = next(bad, (None, None))
            if value is not None:
                lines.append(value)
                expected[reason] += 1
    return b"\n".join(lines) + b"\n", expected


def test_no_crash_every_bad_record_counted_and_kept_model_untouched(tmp_path):
    data, expected = _corpus()
    assert set(expected) == {reason for _, reason in BAD}
    ck, dead, summary = tmp_path / "m.json", tmp_path / "dead.jsonl", tmp_path / "s.json"
    proc = run_cli(
        "run",
        "--format",
        "jsonl",
        "--max-line-bytes",
        "4096",
        "--checkpoint",
        str(ck),
        "--dead-letter",
        str(dead),
        "--summary-json",
        str(summary),
        stdin=data,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    s = json.loads(summary.read_text())
    assert s["invalid"] == dict(expected)
    assert s["learned"] == len(GOOD)
    assert s["records"] == len(GOOD) + sum(expected.values())

    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert Counter(entry["reason"] for entry in letters) == expected
    lines = data.split(b"\n")
    for entry in letters:
        original = lines[entry["position"]["offset"]]
        if "record_base64" in entry:
            assert base64.b64decode(entry["record_base64"]) == original
        elif entry["reason"] == "line_too_long":
            assert original.startswith(entry["record"].encode()) and len(entry["record"]) == 4096
        else:
            assert entry["record"].encode() == original
        assert entry["detail"]

    direct = Perceptron()
    for x, y in GOOD:
        direct.learn_one(x, y)
    assert model_of(ck).get_state() == direct.get_state()


def test_bad_records_in_csv_and_libsvm(tmp_path):
    csv = b"a,b,y\n1,2,1\n1,2\n1,x,0\n1,inf,0\n,,\n-1,-2,0\n"
    summary = tmp_path / "s.json"
    proc = run_cli("run", "--format", "csv", "--summary-json", str(summary), stdin=csv)
    assert proc.returncode == 0
    s = json.loads(summary.read_text())
    assert s["invalid"] == {"wrong_column_count": 1, "non_numeric_value": 1, "non_finite_value": 1}
    assert (s["learned"], s["unlabelled"]) == (2, 1)

    svm = b"1 1:0.5 2:1\n0 1:abc\n1 :3\n1 4\n0 1:nan\n0 1:-1 qid:2\n"
    proc = run_cli("run", "--format", "libsvm", "--summary-json", str(summary), stdin=svm)
    assert proc.returncode == 0
    s = json.loads(summary.read_text())
    assert s["invalid"] == {"non_numeric_value": 1, "malformed_token": 2, "non_finite_value": 1}
    assert s["learned"] == 2


def test_on_error_fail_stops_at_the_first_bad_record(tmp_path):
    data = b'{"a": 1, "y": 1}\n{"a": 2, "y": 0}\n{oops\n{"a": 3, "y": 1}\n'
    ck = tmp_path / "m.json"
    proc = run_cli(
        "run", "--format", "jsonl", "--on-error", "fail", "--checkpoint", str(ck), stdin=data
    )
    assert proc.returncode == 1
    assert b"stdin@2" in proc.stderr and b"invalid_json" in proc.stderr
    assert model_of(ck).n_seen == 2  # the checkpoint holds what came before the bad record
