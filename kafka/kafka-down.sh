#!/usr/bin/env bash
# Stop the broker started by kafka-up.sh: SIGTERM, wait up to KAFKA_STOP_TIMEOUT (30 s), then SIGKILL.
# Exit 0 also when nothing was running.  --clean: afterwards delete the state dir (data, logs, config).
# Env: KAFKA_STATE_DIR (default <repo>/.kafka), KAFKA_STOP_TIMEOUT (default 30).
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
STATE_DIR="${KAFKA_STATE_DIR:-$REPO_DIR/.kafka}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
CLEAN=0

log() { printf '[kafka-down] %s\n' "$*" >&2; }

for arg in "$@"; do
  case "$arg" in
    --clean) CLEAN=1 ;;
    -h|--help) sed -n '2,4p' "${BASH_SOURCE[0]}" >&2; exit 0 ;;
    *) log "unknown argument: $arg (usage: kafka-down.sh [--clean])"; exit 2 ;;
  esac
done

if [[ ! -d "$STATE_DIR" ]]; then
  log "no state dir $STATE_DIR: nothing to stop"; exit 0
fi
STATE_DIR="$(cd -- "$STATE_DIR" && pwd -P)"
PID_FILE="$STATE_DIR/kafka.pid"

# Same lock as kafka-up.sh, so we never race a start in progress (fd 9 is ours only).
if [[ -f "$STATE_DIR/.kafka-state" ]]; then
  exec 9>"$STATE_DIR/.lock"
  flock -w 150 9 || log "could not get $STATE_DIR/.lock in time; stopping anyway"
fi

broker_pid_alive() {
  local pid="$1"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'
}

# True while the pid exists and is not a zombie (an exiting process loses its cmdline early).
pid_running() {
  local pid="$1" stat
  kill -0 "$pid" 2>/dev/null || return 1
  stat="$(cat "/proc/$pid/stat" 2>/dev/null || true)"
  [[ -n "$stat" ]] || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != "Z" ]]
}

if [[ -f "$PID_FILE" ]]; then
  PID="$(cat "$PID_FILE" 2>/dev/null || true)"
  if broker_pid_alive "$PID"; then
    log "stopping broker pid $PID (SIGTERM, up to ${STOP_TIMEOUT}s)"
    kill -TERM "$PID" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT))
    while pid_running "$PID" && ((SECONDS < deadline)); do sleep 0.2; done
    if pid_running "$PID"; then
      log "broker pid $PID still alive after ${STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "$PID" 2>/dev/null || true
      for _ in $(seq 1 50); do pid_running "$PID" || break; sleep 0.1; done
    fi
    if pid_running "$PID"; then log "broker pid $PID did not die"; exit 1; fi
    log "broker stopped"
  else
    log "pid file present but pid '${PID}' is not a running broker"
  fi
  rm -f "$PID_FILE"
else
  log "no pid file: nothing to stop"
fi

if ((CLEAN)); then
  if [[ -f "$STATE_DIR/.kafka-state" && "$STATE_DIR" != "/" && "$STATE_DIR" != "${HOME:-/root}" ]]; then
    log "removing state dir $STATE_DIR"
    rm -rf -- "$STATE_DIR"
  else
    log "refusing to delete $STATE_DIR: it is not a kafka-up.sh state dir (.kafka-state marker missing)"
    exit 1
  fi
fi
exit 0
