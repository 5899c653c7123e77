#!/usr/bin/env bash
# What building the C extensions needs (_speedups, _dense, _features): a C compiler and the
# headers of the Python that builds the venv ($PYTHON, default python3). Installs only what is
# missing (Debian packages); does nothing when both are there. setup.py marks the extensions
# optional, so without them pip would install the package silently without its fast paths:
# the Makefile checks afterwards that all three were built.
set -euo pipefail
PYTHON="${PYTHON:-python3}"

need=()
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
include=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] || need+=(python3-dev)

if ((${#need[@]} == 0)); then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "installing Debian packages for the C extensions: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
