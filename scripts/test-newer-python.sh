#!/usr/bin/env bash
# `make test`'s run of the learner and C-tier tests on a newer CPython than the venv's: the
# dict API's C helpers must hold to the pure-Python reference, bit for bit, on every CPython
# the package supports, and their speed must not depend on a version's internals (issue #25).
#
# The interpreter: $NEWER_PYTHON, else the newest 3.13, else 3.12, under pyenv
# (~/.pyenv/versions). Its venv (.venv313, .venv312) is built on first use and rebuilt when
# the C sources or the package metadata change. None found: a loud warning, and `make test`
# goes on with the main venv only.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${NEWER_PYTHON:-}"
if [ -z "$python" ]; then
  for minor in 3.13 3.12; do
    found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$minor".*/bin/python 2>/dev/null \
      | sort -V | tail -n 1 || true)
    if [ -n "$found" ] && [ -x "$found" ]; then
      python="$found"
      break
    fi
  done
fi
if [ -z "$python" ] || ! "$python" -c 'import sys' 2>/dev/null; then
  {
    echo "################################################################################"
    echo "# WARNING: no newer Python found: the learner and tier tests run on the venv's"
    echo "# Python only. Install 3.13 or 3.12 with pyenv (~/.pyenv/versions/3.13.*), or set"
    echo "# NEWER_PYTHON=/path/to/python3.13."
    echo "################################################################################"
  } >&2
  exit 0
fi

version=$("$python" -c 'import sys; print("%d%d" % sys.version_info[:2])')
venv=".venv$version"
stamp="$venv/.installed"
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml setup.py stream_perceptron -maxdepth 1 \
    \( -name '*.c' -o -name pyproject.toml -o -name setup.py \) -newer "$stamp")" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # uv, else pip (scripts/install-venv.sh); no bytecode compiled at install: the tests'
  # imports compile what they use, once (make test lets them keep it)
  scripts/install-venv.sh "$venv" -e . pytest pytest-timeout hypothesis pandas scikit-learn
  touch "$stamp"
fi
"$venv/bin/python" scripts/check_extensions.py
echo "learner and tier tests on $("$venv/bin/python" -V)"
# The learners against their reference and the tiers against each other; River's contract,
# the scanners and the Preprocessed tier run on the main venv only; the drift detector's tiers here too (this stays near 2 minutes).
# Each test on a quarter of its examples (tests/example_counts.py): the main venv's run draws
# them all; what this run is for shows on any of them (79 -> ~40 s of CPU).
STREAM_PERCEPTRON_TEST_SHARE=0.25 "$venv/bin/python" -m pytest -q -p no:randomly -p no:cacheprovider \
  tests/learners --ignore=tests/learners/test_river_contract.py tests/fast/test_tiers_equal.py \
  tests/fast/test_adwin.py
