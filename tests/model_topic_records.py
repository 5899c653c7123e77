"""Records no stream-perceptron worker writes, for the model-topic tests (in process and on
the real broker)."""

from __future__ import annotations

import json

from stream_perceptron.sharing import Increment
from stream_perceptron.sharing.records import KIND, SCHEMA_VERSION


def _envelope(kind: str, **body) -> bytes:
    return json.dumps({"kind": KIND, "schema_version": SCHEMA_VERSION, "type": kind, **body},
                      allow_nan=True).encode()  # fmt: skip


def hostile_records(fresh_state: dict) -> list[tuple[bytes, bytes | None, str]]:
    """``(key, value, reason)`` of records no worker writes, each refused for ``reason``
    (those under an increment key when the leader reads them)."""
    forged = dict(fresh_state, n_seen=40, bias=-999_689.0, weights=[["x", 3.0]])
    odd = dict(fresh_state, params={**fresh_state["params"], "lr": 0.1})
    nan_delta = {"n": 1, "classes": [{"label": None, "weights": [["x", "NaN"]], "bias": 0.0,
                                      "acc": [], "bias_acc": 0.0}]}  # fmt: skip
    meta = {k: v for k, v in fresh_state.items() if k not in ("weights", "bias")}
    greedy = Increment("stranger", 1, 0, {"n": 10**9, "classes": []}, meta)
    return [
        (b"mixture", b"[" * 100_000, "not_json"),  # RecursionError in json.loads
        (b"anything", b"{" * 50_000 + b"}" * 50_000, "not_json"),
        (b"increment:x:1", b"[" * 100_000, "not_json"),
        (b"mixture", b'{"kind": "someone else"}', "foreign"),
        (b"mixture", _envelope("mixture", version=10**6, state={}), "malformed"),
        (b"mixture", _envelope("mixture", version=10**6, state=forged), "implausible"),
        (b"mixture", _envelope("mixture", version=10**6, state=odd), "mismatch"),
        (b"mixture", _envelope("mixture", version=2**70, state=fresh_state), "malformed"),
        (b"increment:x:" + b"9" * 5000, b"{}", "bad_key"),
        (b"increment:x:" + b"9" * 5000, None, "bad_key"),  # its tombstone too
        (b"k" * 5000, b"{}", "bad_key"),
        (b"increment:nan:1", _envelope("increment", worker="nan", seq=1, base_version=0,
                                       delta=nan_delta, meta=meta), "non_finite"),  # fmt: skip
        (b"partition:x:1", _envelope("partition", topic="x", partition=1, next_offset=1e400,
                                     n_seen=0, n_mistakes=0), "non_finite"),  # fmt: skip
        (greedy.key.encode(), greedy.encode(), "implausible"),
        (b"increment:odd:1", Increment("odd", 1, 0, {"n": 1, "classes": []},
                                       {**meta, "params": odd["params"]}).encode(), "mismatch"),
    ]  # fmt: skip
