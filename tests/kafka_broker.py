"""Start and stop the local test broker of ``kafka/`` (not a test module).

Usable from any test folder as ``import kafka_broker`` (``tests/conftest.py`` puts
``tests/`` on ``sys.path``; ``tests/connectors/kafka/conftest.py`` loads it by path).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_STATE_DIR",
    "BrokerError",
    "SecuredBroker",
    "broker_running",
    "crash_broker",
    "free_port",
    "start_broker",
    "start_secured_broker",
    "stop_broker",
]

REPO = Path(__file__).resolve().parents[1]
KAFKA_UP = REPO / "kafka" / "kafka-up.sh"
KAFKA_DOWN = REPO / "kafka" / "kafka-down.sh"
DEFAULT_STATE_DIR = REPO / ".kafka"
_PREFIX = "KAFKA_BOOTSTRAP_SERVERS="


class BrokerError(RuntimeError):
    """The broker script failed; the message ends with its stderr tail."""


def _env(state_dir: Path | None, port: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if state_dir is not None:
        env["KAFKA_STATE_DIR"] = str(state_dir)
    if port is not None:
        env["KAFKA_PORT"] = str(port)
    return env


def _run(
    script: Path, env: dict[str, str], timeout: float, *args: str
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            [str(script), *args], env=env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-3000:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        raise BrokerError(f"{script.name} timed out after {timeout:g} s:\n{tail}") from exc
    if proc.returncode != 0:
        raise BrokerError(f"{script.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _require_kafka() -> None:
    """A test that starts a broker carries the ``kafka`` marker (:mod:`needs`)."""
    needs = sys.modules.get("needs")
    if needs is not None:
        needs.require("kafka")


def start_broker(
    state_dir: Path | None = None, port: int | None = None, timeout: float = 300
) -> str:
    """Start (or reuse) a broker; return its bootstrap address ``"127.0.0.1:PORT"``.

    Parameters
    ----------
    state_dir
        ``KAFKA_STATE_DIR`` (default: the environment's, else ``<repo>/.kafka``).
    port
        ``KAFKA_PORT``; fix it to restart a broker on the same address.
    timeout
        Seconds allowed to ``kafka-up.sh``.

    Raises
    ------
    BrokerError
        If the script fails or prints no address.
    """
    _require_kafka()
    env = _env(state_dir, port)
    # the script's own readiness wait (90 s unless set) fits inside this call's limit: a soak's
    # restart beside two CPU hogs became ready after 91 s, 50 of them in stalls that the test's
    # sleeper met (session 35), and the script gave up a second before
    env.setdefault("KAFKA_START_TIMEOUT", str(max(1, int(timeout) - 30)))
    proc = _run(KAFKA_UP, env, timeout)
    for line in proc.stdout.splitlines():
        if line.startswith(_PREFIX):
            return line[len(_PREFIX) :].strip()
    raise BrokerError(f"kafka-up.sh printed no {_PREFIX} line:\n{proc.stderr[-3000:]}")


@dataclass(frozen=True)
class SecuredBroker:
    """A broker started with ``KAFKA_SECURE=1``: ``plaintext`` is the operator's listener
    (User:ANONYMOUS, a super user), ``sasl_ssl`` the clients' (SCRAM-SHA-512 over TLS, ACLs),
    ``cafile`` the CA that signed its certificate."""

    plaintext: str
    sasl_ssl: str
    cafile: str


def start_secured_broker(
    state_dir: Path, users: dict[str, str], timeout: float = 300
) -> SecuredBroker:
    """Start a broker in ``state_dir`` with a SASL_SSL listener, the StandardAuthorizer and
    the SCRAM-SHA-512 ``users`` (name -> password), made when its storage is formatted."""
    _require_kafka()
    env = {**_env(state_dir, None), "KAFKA_SECURE": "1",
           "KAFKA_SCRAM_USERS": ",".join(f"{u}={p}" for u, p in users.items())}  # fmt: skip
    proc = _run(KAFKA_UP, env, timeout)
    lines = dict(
        line.split("=", 1) for line in proc.stdout.splitlines() if line.startswith("KAFKA_")
    )
    try:
        return SecuredBroker(
            lines["KAFKA_BOOTSTRAP_SERVERS"], lines["KAFKA_SASL_SSL_SERVERS"],
            lines["KAFKA_SSL_CAFILE"],
        )  # fmt: skip
    except KeyError as exc:
        raise BrokerError(f"kafka-up.sh printed no {exc} line:\n{proc.stderr[-3000:]}") from exc


def stop_broker(state_dir: Path | None = None, timeout: float = 120, clean: bool = False) -> None:
    """Stop the broker of ``state_dir`` (``kafka-down.sh``); harmless if none runs. ``clean``:
    delete its state dir afterwards (its topics, logs and ports)."""
    _run(KAFKA_DOWN, _env(state_dir, None), timeout, *(["--clean"] if clean else []))


def crash_broker(state_dir: Path, timeout: float = 30) -> None:
    """Kill the broker of ``state_dir`` with SIGKILL (a crash: no controlled shutdown, its
    in-doubt transactions finished from its logs when it starts again); wait until it is gone."""
    pid = int((state_dir / "kafka.pid").read_text().strip())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        except OSError:
            break  # gone
        if stat.rsplit(") ", 1)[-1].startswith("Z"):
            break  # dead, not yet reaped
        if time.monotonic() > deadline:
            raise BrokerError(f"broker pid {pid} still alive {timeout:g} s after SIGKILL")
        time.sleep(0.1)


def broker_running(state_dir: Path | None = None) -> bool:
    """Whether the pid file of ``state_dir`` names a live broker process.

    ``state_dir`` defaults as in the scripts: ``$KAFKA_STATE_DIR``, else ``<repo>/.kafka``.
    """
    if state_dir is None:
        state_dir = Path(os.environ.get("KAFKA_STATE_DIR") or DEFAULT_STATE_DIR)
    pid_file = state_dir / "kafka.pid"
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return b"kafka.Kafka" in cmdline


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now, below the kernel's range for outgoing
    connections: a port found by binding port 0 is one of that range, which the kernel also
    gives to clients' connections, and a broker started on it a moment later found it taken
    (a soak run of session 28: "Address already in use", the test's client then reaching
    another test's broker there). Picked at random among about 12,000, so that test processes
    picking at once rarely meet; checked free as the JVM binds (``SO_REUSEADDR``)."""
    high = _ephemeral_low() - 1
    low = max(1024, high - 12_000)
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randint(low, high)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high}")
