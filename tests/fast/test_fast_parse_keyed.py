"""The sparse JSON scanner joined by a key (``--join-key`` on the block path,
:func:`~stream_perceptron.formats.scan.parse_keyed_jsonl_block`): each line's key string taken
out of its features, the rest of the line what the record path
(:meth:`JsonLinesParser.parse_keyed`) gives it, bit for bit; a block scanned in two halves
gives what one scan gives.
"""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pytest

from stream_perceptron import native
from stream_perceptron.formats import make_parser, scan

pytestmark = pytest.mark.skipif(native.dense is None, reason="the C extension is not built")


def bits(v: float) -> str:
    return struct.pack("<d", v).hex()


def lines_of(seed: int, n: int) -> list[bytes]:
    """Keyed lines: events, outcomes, records with both, keys of any place in the line, empty
    and null keys, string features, a key name that is a prefix of a feature's."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        members: list[tuple[str, Any]] = []
        roll = rng.random()
        if roll < 0.45:
            members += [(f"f{j}", round(rng.gauss(0, 3), rng.choice([1, 6, 17]))) for j in
                        rng.sample(range(6), rng.randrange(1, 6))]  # fmt: skip
            members.append(("colour", rng.choice(["red", "blue"])))
            members.append(("idx", rng.choice([1, True, None])))
        if roll > 0.3:
            members.append(("y", rng.choice([0, 1, None])))
        key = rng.choice([f"k{i % 50}", f"k{i % 50}", "", None, "ünï", "id=7"])
        if rng.random() < 0.95:
            members.insert(rng.randrange(len(members) + 1), ("id", key))
        rng.shuffle(members)
        out.append(json.dumps(dict(members), ensure_ascii=False).encode())
    return out


def reference(lines: list[bytes]) -> list[tuple[str | None, dict[str, str], Any]]:
    parser = make_parser("jsonl", "y", "id")
    out = []
    for line in lines:
        key, (x, y) = parser.parse_keyed(line)  # type: ignore[attr-defined]
        out.append((key, {name: bits(v) for name, v in x.items()}, y))
    return out


def scanned(lines: list[bytes]) -> list[tuple[str | None, dict[str, str], Any]] | None:
    block = b"".join(line + b"\n" for line in lines)
    got = scan.parse_keyed_jsonl_block(block, len(lines), "y", "id")
    if got is None:
        return None
    names, rows, cells, keys = got
    indptr = rows.indptr.tolist()
    slots, values = rows.slots.tolist(), rows.values.tolist()
    return [
        (keys[i], {names[slots[k]]: bits(values[k]) for k in range(indptr[i], indptr[i + 1])},
         json.loads(cells[i]))
        for i in range(len(lines))
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_keys_and_features_as_the_record_path_gives_them(seed: int) -> None:
    lines = lines_of(seed, 300)
    got = scanned(lines)
    assert got is not None
    assert got == reference(lines)
    assert any(key is None for key, _, _ in got) and any(key for key, _, _ in got)


def test_two_halves_give_what_one_scan_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = lines_of(99, 4000)
    whole = scanned(lines)
    monkeypatch.setattr(scan, "SPLIT_BYTES", 1 << 10)
    monkeypatch.setattr(scan, "_two_cpus", lambda: True)
    halves = scanned(lines)
    assert halves is not None and halves == whole == reference(lines)


@pytest.mark.parametrize(
    "line, key",
    [
        (b'{"id": "a", "f": 1}', "a"),
        (b'{"f": 1, "id": "", "y": 1}', None),
        (b'{"f": 1, "id": null}', None),
        (b'{"y": 0, "id": "b"}', "b"),
        (b'{"id": "c", "id2": "d"}', "c"),
    ],
)
def test_a_line_and_its_key(line: bytes, key: str | None) -> None:
    got = scanned([line])
    assert got is not None and got[0][0] == key
    assert got == reference([line])


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": "k\\u0031", "f": 1}',  # an escape in the key: the record path decodes it
        b'{"x": {"f": 1}, "y": 1}',  # the nested form: flat objects only when keyed
        b'{"id": "a", "id": "b"}',  # a key given twice
    ],
)
def test_lines_left_to_the_record_path(line: bytes) -> None:
    assert scanned([line]) is None


def test_a_number_as_the_key_stays_a_feature_for_the_caller_to_refuse() -> None:
    names, rows, _, keys = scan.parse_keyed_jsonl_block(b'{"id": 17, "f": 2}\n', 1, "y", "id")
    assert keys == [None] and names == ["id", "f"] and rows.values.tolist() == [17.0, 2.0]
