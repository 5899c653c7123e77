#!/usr/bin/env bash
# Start (or reuse) a genuine single-node Apache Kafka broker (KRaft, broker+controller)
# listening on 127.0.0.1 only. Idempotent; safe to call concurrently (flock).
#
# stdout: exactly one line  KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:PORT  (everything else -> stderr)
# exit 0 when the broker answers a Metadata request, 1 otherwise (broker log tail on stderr).
#
# Env (all optional):
#   KAFKA_STATE_DIR        state dir (config, data, logs, pid)   default: <repo>/.kafka
#   KAFKA_PORT             PLAINTEXT port                        default: previous one, else a free port
#   KAFKA_CONTROLLER_PORT  CONTROLLER port                       default: previous one, else a free port
#   KAFKA_LIBS_DIR         broker jars                           default: <repo>/kafka/libs
#   KAFKA_START_TIMEOUT    seconds to wait for readiness         default: 90
#   KAFKA_HEAP_OPTS        JVM heap flags              default: -Xmx512m -Xms512m -XX:+AlwaysPreTouch
#   KAFKA_JVM_OPTS         extra JVM flags (replace default)     default: -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
#   KAFKA_EXTRA_PROPERTIES extra server.properties lines (newline separated), appended last
#   KAFKA_NICE             the broker's niceness increment (root only below 0; else it runs at
#                          the caller's)                           default: -10
#   KAFKA_SECURE           1: also a SASL_SSL listener (SCRAM-SHA-512; TLS certificates made
#                          here with openssl, CA in $KAFKA_STATE_DIR/tls/ca.pem) and the KRaft
#                          StandardAuthorizer (ACLs). The PLAINTEXT listener stays, for the
#                          operator: its principal User:ANONYMOUS is a super user. Prints two
#                          more lines: KAFKA_SASL_SSL_SERVERS=127.0.0.1:PORT, KAFKA_SSL_CAFILE=PATH
#   KAFKA_SASL_SSL_PORT    SASL_SSL port                          default: previous one, else a free port
#   KAFKA_SCRAM_USERS      "name=password,..." SCRAM-SHA-512 users made when the storage is
#                          formatted (first start of a state dir)  default: admin=admin-secret
#   PYTHON                 python used for port picking/probing  default: python3
#   KAFKA_FETCH_ONLY       1: only fetch the jars (make test does, before its test processes
#                          start, so that none waits on the lock through a download)
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
STATE_DIR="${KAFKA_STATE_DIR:-$REPO_DIR/.kafka}"
LIBS_DIR="${KAFKA_LIBS_DIR:-$SCRIPT_DIR/libs}"
TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
PYTHON="${PYTHON:-python3}"
FETCH_ONLY="${KAFKA_FETCH_ONLY:-0}"
# The test broker stands for a cluster on machines of its own: it is run before the test's
# processes when the CPU is short. Beside the soak's load (four test processes, their workers,
# two busy-loop hogs) a broker at the same priority went unscheduled for 36 s to 2 minutes
# (its log silent, no JVM pause in its gc.log, controller events of 119 s), past every client's
# timeout: the tests then measured the machine, not the engine.
NICE="${KAFKA_NICE:--10}"
if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA="java"; fi

log() { printf '[kafka-up] %s\n' "$*" >&2; }

for tool in "$JAVA" "$PYTHON" flock setsid; do
  command -v "$tool" >/dev/null 2>&1 || { log "required command not found: $tool"; exit 1; }
done

mkdir -p "$STATE_DIR"
STATE_DIR="$(cd -- "$STATE_DIR" && pwd -P)"
DATA_DIR="$STATE_DIR/data"
PROPS="$STATE_DIR/server.properties"
LOG4J="$STATE_DIR/log4j2.properties"
PID_FILE="$STATE_DIR/kafka.pid"
PORTS_FILE="$STATE_DIR/ports"
CLUSTER_ID_FILE="$STATE_DIR/cluster.id"
SERVER_LOG="$STATE_DIR/server.log"   # log4j2 (INFO)
OUT_LOG="$STATE_DIR/kafka.out"       # JVM stdout/stderr (crashes, early errors)
touch "$STATE_DIR/.kafka-state"      # marker: kafka-down.sh --clean only deletes dirs carrying it

# Serialize concurrent callers (e.g. pytest-xdist workers). fd 9 is closed for the broker.
exec 9>"$STATE_DIR/.lock"
if ! flock -w $((TIMEOUT + 60)) 9; then
  log "timed out waiting for the lock $STATE_DIR/.lock"; exit 1
fi

# ---------------------------------------------------------------- helpers
broker_pid_alive() { # $1 = pid; true if it is a live kafka.Kafka process
  local pid="$1"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'
}

pid_running() { # $1 = pid; true while it exists and is not a zombie
  local pid="$1" stat
  kill -0 "$pid" 2>/dev/null || return 1
  stat="$(cat "/proc/$pid/stat" 2>/dev/null || true)"
  [[ -n "$stat" ]] || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != "Z" ]]
}

log_tail() {
  local f
  for f in "$SERVER_LOG" "$OUT_LOG"; do
    if [[ -s "$f" ]]; then
      printf '[kafka-up] ---- last lines of %s ----\n' "$f" >&2
      tail -n 60 "$f" >&2 || true
    fi
  done
}

# Probe: a real Kafka ApiVersions + Metadata round trip (stdlib only). Exit 0 when the broker
# returns metadata that lists itself (i.e. it is registered, unfenced and serving requests).
probe() { # $1 = port
  "$PYTHON" - "$1" <<'PY' 2>/dev/null
import socket, struct, sys
port = int(sys.argv[1])

def call(sock, api_key, version, corr, body):
    cid = b"kafka-up"
    hdr = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid
    msg = hdr + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    def recv(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf
    (size,) = struct.unpack(">i", recv(4))
    data = recv(size)
    (rcorr,) = struct.unpack_from(">i", data, 0)
    assert rcorr == corr
    return data, 4

with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
    s.settimeout(3)
    # ApiVersions v0: error_code, [api_key, min, max]
    d, o = call(s, 18, 0, 1, b"")
    err, n = struct.unpack_from(">hi", d, o); o += 6
    assert err == 0
    ranges = {}
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", d, o); o += 6
        ranges[k] = (lo, hi)
    lo, hi = ranges[3]
    v = max(4, lo)
    if v > min(8, hi):
        sys.exit(0)  # no non-flexible Metadata version to parse; ApiVersions answered
    # Metadata v4..v8 (same prefix): topics=null (all), allow_auto_topic_creation=false
    d, o = call(s, 3, v, 2, struct.pack(">ib", -1, 0))
    o += 4  # throttle_time_ms
    (nb,) = struct.unpack_from(">i", d, o); o += 4
    ports = []
    for _ in range(nb):
        node, hl = struct.unpack_from(">ih", d, o); o += 6 + hl
        (bport, rl) = struct.unpack_from(">ih", d, o); o += 6 + max(rl, 0)
        ports.append(bport)
    sys.exit(0 if port in ports else 1)
PY
}

port_free() { # $1 = port
  "$PYTHON" - "$1" <<'PY' 2>/dev/null
import socket, sys
s = socket.socket()
# Like the JVM's server socket: connections left in TIME_WAIT do not make the port busy.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

free_ports() { # prints three distinct free loopback ports
  # below the kernel's range for outgoing connections: a port found by binding port 0 is one
  # the kernel also gives to clients' connections, and a broker started on it a moment later
  # could find it taken (tests/kafka_broker.py:free_port says more)
  "$PYTHON" - <<'PY'
import random, socket
try:
    high = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0]) - 1
except (OSError, ValueError, IndexError):
    high = 32767
low, rng, socks = max(1024, high - 12000), random.SystemRandom(), []
while len(socks) < 3:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", rng.randint(low, high)))
    except OSError:
        s.close()
        continue
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

wait_ready() { # $1 = pid, $2 = port, $3 = the background job's pid (a broker just started here)
  # A broker this script just started is its own child: whether it still runs is the question,
  # not whether its command line names kafka.Kafka (broker_pid_alive's check against a stale
  # pid file, kept for a broker found running), which can read empty while the child's shell
  # execs java under heavy load.
  local pid="$1" port="$2" job="${3:-}" deadline=$((SECONDS + TIMEOUT)) status
  while ((SECONDS < deadline)); do
    if { [[ -n "$job" ]] && ! pid_running "$pid"; } || { [[ -z "$job" ]] && ! broker_pid_alive "$pid"; }; then
      status="unknown"
      if [[ "$job" == "$pid" ]]; then
        status=0; wait "$job" 2>/dev/null || status="$?"
        if ((status > 128)); then status="$status: signal $((status - 128))"; fi
      fi
      log "broker process $pid exited during start-up (exit status $status)"
      return 1
    fi
    if probe "$port"; then return 0; fi
    sleep 0.5
  done
  log "broker not ready after ${TIMEOUT}s"; return 1
}

# ---------------------------------------------------------------- already running?
if [[ "$FETCH_ONLY" != 1 && -f "$PID_FILE" ]]; then
  old_pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  if broker_pid_alive "$old_pid" && [[ -f "$PORTS_FILE" ]]; then
    PORT="$(sed -n 's/^PORT=//p' "$PORTS_FILE")"
    if wait_ready "$old_pid" "$PORT"; then
      log "broker already running (pid $old_pid)"
      echo "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT"
      running_sport="$(sed -n 's/^SASL_SSL_PORT=//p' "$PORTS_FILE")"
      if [[ -n "$running_sport" ]]; then
        echo "KAFKA_SASL_SSL_SERVERS=127.0.0.1:$running_sport"
        echo "KAFKA_SSL_CAFILE=$STATE_DIR/tls/ca.pem"
      fi
      exit 0
    fi
    log_tail; exit 1
  fi
  log "removing stale pid file (pid '${old_pid}' is not a running broker)"
  rm -f "$PID_FILE"
fi

# ---------------------------------------------------------------- jars
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$SCRIPT_DIR/pom.xml" | head -n 1)"
# Brokers of other state dirs (a test's own broker beside the session's) share the jars: one
# fetch at a time, under a lock of the jar dir's own; the others wait and find them there. (Two
# fetches at once deleted and copied each other's jars: "Failed to copy artifact", the first
# run of a fresh clone's broker tests, 1 of 10 soak runs.)
mkdir -p "$(dirname "$LIBS_DIR")"
exec 8>"$LIBS_DIR.lock"
if ! flock -w $((TIMEOUT + 600)) 8; then
  log "timed out waiting for the lock $LIBS_DIR.lock"; exit 1
fi
if ! compgen -G "$LIBS_DIR/kafka_2.13-${KAFKA_VERSION}.jar" >/dev/null \
   || ! compgen -G "$LIBS_DIR/log4j-slf4j*-impl-*.jar" >/dev/null; then
  log "fetching Kafka ${KAFKA_VERSION} jars into $LIBS_DIR (mvn, cached in ~/.m2)"
  if [[ -d "$LIBS_DIR" ]]; then rm -f "$LIBS_DIR"/*.jar; fi
  mvn -q -B -Dstyle.color=never -f "$SCRIPT_DIR/pom.xml" dependency:copy-dependencies -Dkafka.libs.dir="$LIBS_DIR" >&2 || {
    log "mvn dependency:copy-dependencies failed"; exit 1; }
fi
exec 8>&-  # the lock is released; the broker never holds it
CP="$LIBS_DIR/*"
if [[ "$FETCH_ONLY" == 1 ]]; then log "Kafka ${KAFKA_VERSION} jars in $LIBS_DIR"; exit 0; fi

# ---------------------------------------------------------------- ports
PREV_PORT="" PREV_CPORT="" PREV_SPORT=""
if [[ -f "$PORTS_FILE" ]]; then
  PREV_PORT="$(sed -n 's/^PORT=//p' "$PORTS_FILE")"
  PREV_CPORT="$(sed -n 's/^CONTROLLER_PORT=//p' "$PORTS_FILE")"
  PREV_SPORT="$(sed -n 's/^SASL_SSL_PORT=//p' "$PORTS_FILE")"
fi
read -r FREE1 FREE2 FREE3 < <(free_ports)
PORT="${KAFKA_PORT:-}"
CPORT="${KAFKA_CONTROLLER_PORT:-}"
if [[ -z "$PORT" ]]; then
  if [[ -n "$PREV_PORT" && "$PREV_PORT" != "$CPORT" ]] && port_free "$PREV_PORT"; then PORT="$PREV_PORT"; else PORT="$FREE1"; fi
fi
if [[ -z "$CPORT" ]]; then
  if [[ -n "$PREV_CPORT" && "$PREV_CPORT" != "$PORT" ]] && port_free "$PREV_CPORT"; then CPORT="$PREV_CPORT"
  elif [[ "$FREE2" != "$PORT" ]]; then CPORT="$FREE2"; else CPORT="$FREE1"; fi
fi
if [[ "$PORT" == "$CPORT" ]]; then log "KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ ($PORT)"; exit 1; fi
SECURE="${KAFKA_SECURE:-0}"
SPORT=""
if [[ "$SECURE" == 1 ]]; then
  SPORT="${KAFKA_SASL_SSL_PORT:-}"
  if [[ -z "$SPORT" ]]; then
    if [[ -n "$PREV_SPORT" && "$PREV_SPORT" != "$PORT" && "$PREV_SPORT" != "$CPORT" ]] \
       && port_free "$PREV_SPORT"; then SPORT="$PREV_SPORT"
    else
      for candidate in "$FREE3" "$FREE2" "$FREE1"; do
        if [[ "$candidate" != "$PORT" && "$candidate" != "$CPORT" ]]; then SPORT="$candidate"; break; fi
      done
    fi
  fi
  if [[ "$SPORT" == "$PORT" || "$SPORT" == "$CPORT" ]]; then
    log "KAFKA_SASL_SSL_PORT must differ from the other ports ($SPORT)"; exit 1
  fi
elif [[ "$SECURE" != 0 ]]; then
  log "KAFKA_SECURE must be 0 or 1 (got '$SECURE')"; exit 1
fi
for p in "$PORT" "$CPORT" $SPORT; do
  if ! port_free "$p"; then log "port 127.0.0.1:$p is already in use"; exit 1; fi
done
printf 'PORT=%s\nCONTROLLER_PORT=%s\nSASL_SSL_PORT=%s\n' "$PORT" "$CPORT" "$SPORT" >"$PORTS_FILE"

# ---------------------------------------------------------------- TLS (KAFKA_SECURE=1)
TLS_DIR="$STATE_DIR/tls"
STORE_PASS="stream-perceptron-test"
make_tls() { # a CA and the broker's certificate for 127.0.0.1, made once per state dir
  [[ -s "$TLS_DIR/broker.p12" && -s "$TLS_DIR/ca.pem" ]] && return 0
  command -v openssl >/dev/null 2>&1 || { log "KAFKA_SECURE=1 needs openssl"; return 1; }
  mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -keyout ca.key -out ca.pem \
      -subj "/CN=stream-perceptron test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=127.0.0.1"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -extfile broker.ext -out broker.pem
    openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
      -out broker.p12 -passout "pass:$STORE_PASS"
  ) >>"$OUT_LOG" 2>&1 || { log "making the TLS certificates failed"; return 1; }
}
if [[ "$SECURE" == 1 ]]; then make_tls || { log_tail; exit 1; }; fi

# ---------------------------------------------------------------- config
cat >"$PROPS" <<EOF
# Written by kafka/kafka-up.sh -- regenerated on every start.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:${CPORT}
listeners=PLAINTEXT://127.0.0.1:${PORT},CONTROLLER://127.0.0.1:${CPORT}
advertised.listeners=PLAINTEXT://127.0.0.1:${PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${DATA_DIR}
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
if [[ "$SECURE" == 1 ]]; then
  sed -i "s|^listeners=.*|listeners=PLAINTEXT://127.0.0.1:${PORT},CONTROLLER://127.0.0.1:${CPORT},SASL_SSL://127.0.0.1:${SPORT}|;
          s|^advertised.listeners=.*|advertised.listeners=PLAINTEXT://127.0.0.1:${PORT},SASL_SSL://127.0.0.1:${SPORT}|;
          s|^listener.security.protocol.map=.*|listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL|" "$PROPS"
  cat >>"$PROPS" <<EOF
# KAFKA_SECURE=1: clients on SASL_SSL (SCRAM-SHA-512 over TLS), authorised by ACLs
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=${TLS_DIR}/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=${STORE_PASS}
listener.name.sasl_ssl.ssl.key.password=${STORE_PASS}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin
allow.everyone.if.no.acl.found=false
EOF
fi
if [[ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]]; then
  printf '%s\n' "# KAFKA_EXTRA_PROPERTIES" "$KAFKA_EXTRA_PROPERTIES" >>"$PROPS"
fi

cat >"$LOG4J" <<EOF
# Written by kafka/kafka-up.sh: broker log at INFO to a file, nothing on the console.
status = warn
name = kafka-test-broker
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${SERVER_LOG}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.netclient.name = org.apache.kafka.clients.NetworkClient
logger.netclient.level = WARN
EOF

# Test broker: favour start-up time over peak throughput (C1 only, serial GC: ~2-3 s faster
# on 2 cores). KAFKA_JVM_OPTS replaces these (set it to "" for the JVM defaults).
FAST_JVM="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
read -r -a TOOL_JVM <<<"$FAST_JVM"
# The file appender flushes every line, so log4j's own shutdown hook is not needed (and would
# only print "Unable to register Log4j shutdown hook" to kafka.out on every stop).
JAVA_COMMON=(-Djava.awt.headless=true "-Dlog4j2.configurationFile=$LOG4J" -Dlog4j2.shutdownHookEnabled=false
             "-Dkafka.logs.dir=$STATE_DIR")

# Keep the previous run's logs one generation back, so the tail shown on failure is this run's.
for f in "$SERVER_LOG" "$OUT_LOG"; do if [[ -f "$f" ]]; then mv -f "$f" "$f.prev"; fi; done

# ---------------------------------------------------------------- format storage (first start only)
FORMATTED=0
if [[ ! -f "$DATA_DIR/meta.properties" ]]; then
  FORMATTED=1
  if [[ -s "$CLUSTER_ID_FILE" ]]; then
    CLUSTER_ID="$(cat "$CLUSTER_ID_FILE")"
  else
    # what `kafka-storage.sh random-uuid` prints (16 random bytes, URL-safe base64 without
    # padding, not starting with "-"), without a JVM start of its own (~1 s of CPU)
    if ! CLUSTER_ID="$("$PYTHON" -c 'import base64, uuid
while (s := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
    pass
print(s)')" || [[ -z "$CLUSTER_ID" ]]; then
      log "no cluster id made ($PYTHON)"; exit 1
    fi
    printf '%s\n' "$CLUSTER_ID" >"$CLUSTER_ID_FILE"
  fi
  log "formatting storage in $DATA_DIR (cluster id $CLUSTER_ID)"
  SCRAM=()
  if [[ "$SECURE" == 1 ]]; then
    IFS=',' read -r -a users <<<"${KAFKA_SCRAM_USERS:-admin=admin-secret}"
    for user in "${users[@]}"; do
      SCRAM+=(--add-scram "SCRAM-SHA-512=[name=${user%%=*},password=${user#*=}]")
    done
  fi
  if ! "$JAVA" "${TOOL_JVM[@]}" "${JAVA_COMMON[@]}" -cp "$CP" kafka.tools.StorageTool format --standalone \
        -t "$CLUSTER_ID" -c "$PROPS" "${SCRAM[@]}" >>"$OUT_LOG" 2>&1; then
    log "kafka.tools.StorageTool format failed"; log_tail; exit 1
  fi
fi

# ---------------------------------------------------------------- start
log "starting Kafka ${KAFKA_VERSION} on 127.0.0.1:${PORT} (controller 127.0.0.1:${CPORT}), state in $STATE_DIR"
# The whole heap committed and touched at start (AlwaysPreTouch): a heap that grew later paused
# the broker in its first young collection after the growth for 17.7 and 24.4 s on a VM whose
# fresh pages came slowly from its host (gc.log: "Pause Young ... 343M->227M(427M) 17654.835ms",
# where the others took 80-100 ms), past every client's timeout.
read -r -a HEAP <<<"${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m -XX:+AlwaysPreTouch}"
read -r -a EXTRA_JVM <<<"${KAFKA_JVM_OPTS-$FAST_JVM}"
# The JVM's pauses (garbage collections, safepoints), for a member dropped or a request slow
# while the broker stood still: the test session keeps it with server.log when a test failed.
GC_LOG=(-Xlog:gc,safepoint:file="$STATE_DIR/gc.log":time,uptime:filecount=2,filesize=10m)
printf '==== %s start (port %s) ====\n' "$(date -Is)" "$PORT" >>"$OUT_LOG"
rm -f "$PID_FILE.tmp"
# New session (setsid) so it outlives the caller; its own shell writes its pid then execs java.
# stdin/stdout/stderr are detached from the caller (so a subprocess pipe is not held open).
# shellcheck disable=SC2016  # $$ and $@ are for the child shell, on purpose
nohup setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE.tmp" \
  nice -n "$NICE" "$JAVA" "${HEAP[@]}" "${EXTRA_JVM[@]}" "${GC_LOG[@]}" "${JAVA_COMMON[@]}" -cp "$CP" kafka.Kafka "$PROPS" \
  </dev/null >>"$OUT_LOG" 2>&1 9>&- &
JOB_PID=$!
for _ in $(seq 1 100); do [[ -s "$PID_FILE.tmp" ]] && break; sleep 0.05; done
if [[ ! -s "$PID_FILE.tmp" ]]; then log "broker did not start"; log_tail; exit 1; fi
mv -f "$PID_FILE.tmp" "$PID_FILE"
PID="$(cat "$PID_FILE")"

if wait_ready "$PID" "$PORT" "$JOB_PID"; then
  log "broker ready (pid $PID) after ${SECONDS}s"
  echo "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT"
  if [[ "$SECURE" == 1 ]]; then
    echo "KAFKA_SASL_SSL_SERVERS=127.0.0.1:$SPORT"
    echo "KAFKA_SSL_CAFILE=$TLS_DIR/ca.pem"
  fi
  exit 0
fi

log_tail
if broker_pid_alive "$PID"; then
  kill -TERM "$PID" 2>/dev/null || true
  for _ in $(seq 1 40); do pid_running "$PID" || break; sleep 0.25; done
  kill -KILL "$PID" 2>/dev/null || true
  for _ in $(seq 1 40); do pid_running "$PID" || break; sleep 0.25; done
fi
rm -f "$PID_FILE"
# A port taken between its check above and the JVM's bind, seconds later: another broker
# starting at the same moment (a test's own beside the session's) can pick the same one. Soak
# 34's second run: the session broker's controller port, "Address already in use" twice, and
# every broker test of two test processes failed at setup. A fresh state dir starts again,
# formatted again, on ports picked again; twice at most. (A restarted broker keeps its ports:
# its controller's address is in its metadata.)
ATTEMPT="${KAFKA_UP_ATTEMPT:-1}"
TAKEN="$(sed -n 's/.*failed to bind to 127\.0\.0\.1:\([0-9]*\): Address already in use.*/\1/p' \
          "$OUT_LOG" "$SERVER_LOG" 2>/dev/null | head -n 1)" || true
if ((FORMATTED && ATTEMPT < 3)) && [[ -n "$TAKEN" ]] \
   && [[ "$TAKEN" != "${KAFKA_PORT:-}" && "$TAKEN" != "${KAFKA_CONTROLLER_PORT:-}" \
         && "$TAKEN" != "${KAFKA_SASL_SSL_PORT:-}" ]]; then
  log "port $TAKEN was taken as the broker bound it: starting again on other ports (try $((ATTEMPT + 1)) of 3)"
  rm -rf -- "$DATA_DIR" "$PORTS_FILE"
  exec env KAFKA_UP_ATTEMPT=$((ATTEMPT + 1)) "${BASH_SOURCE[0]}" "$@"
fi
exit 1
