#!/usr/bin/env bash
# Install packages into a venv with uv, else pip: scripts/install-venv.sh VENV PIP-ARGS...
# (e.g. scripts/install-venv.sh .venv -e '.[test,rdkafka,docs]').
#
# Why uv: `make test` builds two venvs on a fresh clone (the main one and the newer Python's),
# and pip spent most of its set-up there. Measured on this 2-core machine with warm caches,
# the main venv's `-e '.[test,rdkafka,docs]'` (85 packages, our C extensions built): pip 39 s
# of CPU, 26 with --no-compile; uv 11 s (it links the wheels it has unpacked once instead of
# unpacking each again). uv installs without compiling bytecode; pip is told not to either,
# and scripts/compile_bytecode.py compiles on every core after. uv itself comes from PyPI into
# the venv (a 15 MB wheel); where it cannot be had or fails (no wheel for the platform, a
# proxy it does not trust), pip installs instead, as before.
set -euo pipefail
venv="$1"
shift
python="$venv/bin/python"
repo_uv="$(dirname "$0")/../.venv/bin/uv"  # the main venv's, for the newer Python's venv
uv=""
for candidate in "$venv/bin/uv" "$repo_uv"; do
  if [ -x "$candidate" ]; then uv="$candidate"; break; fi
done
if [ -z "$uv" ] && "$python" -m pip install --quiet uv >/dev/null 2>&1; then
  uv="$venv/bin/uv"
fi
if [ -n "$uv" ]; then
  links=()
  if [ -n "${PIP_FIND_LINKS:-}" ]; then links=(--find-links "$PIP_FIND_LINKS"); fi
  if "$uv" pip install --quiet --python "$python" "${links[@]}" "$@"; then
    exit 0
  fi
  echo "install-venv: uv failed; installing with pip" >&2
fi
"$python" -m pip install --quiet --no-compile "$@"
