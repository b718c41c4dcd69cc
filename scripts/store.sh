#!/usr/bin/env bash
# Starts and stops a MongoDB-compatible store for development, tests and demos.
#
#   scripts/store.sh install                      # make sure a server is available
#   scripts/store.sh start STATE_DIR [PORT] [--persist]
#       prints the URI (mongodb://127.0.0.1:PORT) on stdout; the server's pid,
#       kind and log live in STATE_DIR. --persist keeps data in STATE_DIR/data.
#   scripts/store.sh stop STATE_DIR
#
# Uses `mongod` when it is on PATH (real deployments, the Ansible playbooks);
# otherwise nx-27017, a MongoDB wire-protocol server on SQLite from PyPI,
# installed into .venv-store/ (override with NX_27017=/path/to/nx-27017).
# Which one ran is written to STATE_DIR/kind and to stderr.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_STORE_VENV:-$root/.venv-store}"
nx="${NX_27017:-$venv/bin/nx-27017}"
NX_VERSION=0.8.1

die() { echo "store.sh: $*" >&2; exit 1; }

install() {
  if command -v mongod >/dev/null 2>&1; then return 0; fi
  if [ -x "$nx" ]; then return 0; fi
  echo "store.sh: no mongod on PATH; installing nx-27017 $NX_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "nx-27017==$NX_VERSION"
}

# A port for the store when none is given (scripts/crawl-local.sh; the test
# harness always passes its own). Not one the kernel picks (bind to port 0):
# that comes from the ephemeral range (ip_local_port_range), from which every
# other process's port-0 servers and outgoing connections also take ports, so
# the kernel may hand it to someone else before the store binds it, and
# wait_port would then talk to the wrong server. Instead a random port below
# that range, [20000, low), that is bindable now.
free_port() {
  python3 - <<'PY'
import random, socket
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
start = 20000 if low > 20000 else 1024
ports = list(range(start, low))
random.shuffle(ports)
for port in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("store.sh: no free port below the ephemeral range")
PY
}

# Whether nothing listens on 127.0.0.1:PORT (SO_REUSEADDR, as servers bind:
# connections of a previous server in TIME_WAIT do not count).
port_free() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}

wait_port() {
  local port=$1 pid=$2
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

start() {
  local dir=${1:?state dir}; local port=${2:-}; local persist=${3:-}
  [ "$port" = "--persist" ] && { persist=--persist; port=; }
  [ -n "$port" ] || port=$(free_port)
  # Something already on the port would answer wait_port in the store's place.
  port_free "$port" || die "port $port on 127.0.0.1 is already in use"
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  install
  local kind pid
  if command -v mongod >/dev/null 2>&1; then
    kind=mongod
    mkdir -p "$dir/data"
    nohup mongod --bind_ip 127.0.0.1 --port "$port" --dbpath "$dir/data" --quiet \
      >"$dir/store.log" 2>&1 &
    pid=$!
  else
    kind=nx-27017
    local db=memory
    if [ "$persist" = "--persist" ]; then db="$dir/data"; mkdir -p "$db"; fi
    nohup "$nx" --data-dir "$db" --host 127.0.0.1 -p "$port" \
      --log-file "$dir/store.log" --pid-file "$dir/nx.pid" >"$dir/stdout.log" 2>&1 &
    pid=$!
  fi
  echo "$pid" >"$dir/pid"; echo "$kind" >"$dir/kind"; echo "mongodb://127.0.0.1:$port" >"$dir/uri"
  wait_port "$port" "$pid" || { tail -20 "$dir"/*.log >&2 || true; die "$kind did not start on port $port"; }
  echo "store.sh: $kind listening on 127.0.0.1:$port (state in $dir)" >&2
  echo "mongodb://127.0.0.1:$port"
}

stop() {
  local dir=${1:?state dir}
  [ -f "$dir/pid" ] || return 0
  local pid; pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) die "usage: store.sh install | start STATE_DIR [PORT] [--persist] | stop STATE_DIR" ;;
esac
