"""Flag values of every kind through the whole CLI, in process: exit 0, 1 or 2, never an
exception (a traceback); only loopback addresses are ever contacted."""

from __future__ import annotations

import io
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_perceptron.cli import main

DATA = b"a,b,y\n1,2,1\n-1,0.5,0\n3,1,1\n,,\n2,x,1\n"

TEXT = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "0", "-1", "1e308", "1e-308", "nan", "inf", "x", "1_0", " 7 ", "٣"]),
    st.text(max_size=6),
)
FLAGS: dict[str, st.SearchStrategy[str]] = {
    "--lr": TEXT,
    "--seed": TEXT,
    "--rolling-window": TEXT,
    "--metrics-max-weights": TEXT,
    "--max-line-bytes": TEXT,
    "--checkpoint-every": TEXT,
    "--checkpoint-interval": TEXT,
    "--push-interval": TEXT,
    "--metrics-port": st.one_of(TEXT, st.sampled_from(["-1", "0", "65536", "99999"])),
    "--pushgateway": st.sampled_from(
        ["not a url", "http://127.0.0.1:1", "127.0.0.1:1", "ftp://127.0.0.1", "http://",
         "http://127.0.0.1:x", "http://[::1", ""]
    ),  # fmt: skip
    "--model": st.sampled_from(["binary", "multiclass", "centroid", "tree", ""]),
    "--bias": st.sampled_from(["learned", "r2", "none", "huge"]),
    "--init": st.sampled_from(["zeros", "random", "ones"]),
    "--on-error": st.sampled_from(["skip", "fail", "ignore"]),
    "--label": st.sampled_from(["y", "a", "missing", ""]),
    "--scale": st.sampled_from(["standard", "minmax", ""]),
    "--hash-bits": st.one_of(TEXT, st.sampled_from(["0", "1", "18", "32", "33"])),
    "--average-half-life": st.one_of(TEXT, st.sampled_from(["1e-20", "0.0009", "0.004", "700"])),
    "--metrics-host": st.sampled_from(["", " ", "[::1]", "127.0.0.1"]),
    "--run-name": st.sampled_from(["run", "\udcff", "x\ud800"]),
}


def _run(argv: list[str]) -> int:
    stdin = io.TextIOWrapper(io.BytesIO(DATA))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdin", stdin)
        try:
            return main(argv)
        except SystemExit as e:  # argparse's usage errors
            return int(e.code or 0)


@given(
    st.dictionaries(st.sampled_from(sorted(FLAGS)), st.just(None), min_size=1, max_size=3).flatmap(
        lambda chosen: st.fixed_dictionaries({flag: FLAGS[flag] for flag in chosen})
    )
)
def test_any_flag_values_end_in_a_documented_exit_code(flags):
    argv = ["run", "--format", "csv", "-q", "--averaged"]
    for flag, value in flags.items():
        argv.append(f"{flag}={value}")
    assert _run(argv) in (0, 1, 2)
