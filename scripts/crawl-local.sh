#!/usr/bin/env bash
# Sets up and runs a real crawl on this machine: builds release binaries,
# starts a store, one dispatcher and two supervisors with two crawler
# children each, shows live progress and ends with a summary.
#
#   scripts/crawl-local.sh                      # crawl the built-in synthetic web (no internet needed)
#   scripts/crawl-local.sh seeds.txt [FLAGS]    # crawl these seeds; FLAGS go to the dispatcher
#   scripts/crawl-local.sh --keep ...           # leave the store running at the end (to query it)
#   scripts/crawl-local.sh --resume runs/T [FLAGS]
#                                               # go on with an earlier run (stopped, or to re-export):
#                                               # its store, seeds, secret and synthetic web again
#
# Environment: SUPERVISORS (2), CHILDREN (2), WEB_HOSTS (40), WEB_PAGES (100) for the synthetic web,
# WEB_TRAPS=1 to add the open web's traps to it (session ids, calendars, ...: tests/src/web/traps.rs).
# CARGO_FEATURES for the build, e.g. crawler-child/fault-injection to honour the CRAWLER_FAULT_*
# test hooks (scripts/README.md).
# Everything of a run (store data, timing logs, summary, WARC) is kept in runs/<time>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SUPERVISORS=${SUPERVISORS:-2}
CHILDREN=${CHILDREN:-2}
keep=false
resume=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=true; shift ;;
    --resume)
      [ $# -ge 2 ] || { echo "crawl-local.sh: --resume needs a run directory" >&2; exit 2; }
      resume=$2; shift 2 ;;
    *) break ;;
  esac
done
if [ -n "$resume" ]; then
  run=${resume%/}
  for f in store/data seeds.txt cluster_secret; do
    [ -e "$run/$f" ] || { echo "crawl-local.sh: $run/$f is missing: not a run directory of this script" >&2; exit 2; }
  done
else
  run="runs/$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$run/logs"
bin="$root/target/release"
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if $keep; then
    echo "the store is still running at $(cat "$run/store/uri" 2>/dev/null); stop it with: scripts/store.sh stop $run/store"
  else
    scripts/store.sh stop "$run/store"
  fi
}
trap cleanup EXIT

echo "== building release binaries"
cargo build --release --workspace --bins ${CARGO_FEATURES:+--features "$CARGO_FEATURES"}

echo "== starting the store"
uri=$(scripts/store.sh start "$run/store" --persist)
echo "$uri" >"$run/store/uri"
kind=$(cat "$run/store/kind")

# The seeds: given, or the synthetic web's. A resumed run takes its own
# again (a copy is kept in the run directory), and restarts the synthetic
# web it had, on the same port, since the port is part of every URL.
if [ -n "$resume" ]; then
  seeds="$run/seeds.txt"
  [ -f "$run/web.env" ] && . "$run/web.env"
else
  seeds=${1:-}
  [ $# -gt 0 ] && shift
  if [ -n "$seeds" ]; then
    cp "$seeds" "$run/seeds.txt"
    seeds="$run/seeds.txt"
  else
    printf 'web_hosts=%s\nweb_pages=%s\nweb_traps=%s\nweb_bind=127.0.0.1:0\n' "${WEB_HOSTS:-40}" "${WEB_PAGES:-100}" \
      "${WEB_TRAPS:-}" >"$run/web.env"
    . "$run/web.env"
  fi
fi
web_args=()
policy=()
if [ -n "${web_hosts:-}" ]; then
  echo "== starting the synthetic web ($web_hosts hosts x $web_pages pages)"
  "$bin/synthweb" --hosts "$web_hosts" --pages-per-host "$web_pages" --bind "$web_bind" \
    --crawl-delay-every 10 --crawl-delay-secs 0.1 ${web_traps:+--traps} \
    --write-seeds "$run/seeds.txt" --write-hosts "$run/hosts" >"$run/synthweb.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q listening "$run/synthweb.out" 2>/dev/null && break; sleep 0.1; done
  cat "$run/synthweb.out"
  grep -q listening "$run/synthweb.out" || { echo "crawl-local.sh: the synthetic web did not start" >&2; exit 1; }
  # Resume on this port again.
  port=$(head -n 1 "$run/seeds.txt" | sed -E 's#^http://[^:/]+:([0-9]+)/.*#\1#')
  sed -i "s/^web_bind=.*/web_bind=127.0.0.1:$port/" "$run/web.env"
  seeds="$run/seeds.txt"
  web_args=(--hosts-file "$run/hosts")
  # Our own server on loopback: a short politeness delay is fine.
  policy=(--min-delay-ms 10)
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
endpoint="tcp://127.0.0.1:$port"
common=(--mongo-uri "$uri" --timing-log "$run/logs/")
# A cluster secret for this run, in a file only we can read; the processes
# get its path (the secret itself never goes on a command line).
[ -s "$run/cluster_secret" ] ||
  (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$run/cluster_secret")
common+=(--cluster-secret-file "$run/cluster_secret")
# The run's debug token: control (crawlctl) and profiles (cluster-profile)
# need it; the first process writes it there (0600) and the others read it.
token_file="$(cd "$run" && pwd)/debug_token"
common+=(--debug-token-file "$token_file")

echo "== crawling (store: $kind at $uri; logs in $run/logs)"
echo "   steer it: CRAWLER_DEBUG_TOKEN_FILE=$token_file $bin/crawlctl --dispatcher http://<debug address the dispatcher prints> status"
"$bin/dispatcher" --bind "$endpoint" --seeds "$seeds" --min-supervisors "$SUPERVISORS" \
  --summary-file "$run/summary.json" "${common[@]}" "${policy[@]}" "$@" >"$run/summary.out" &
dispatcher=$!
for i in $(seq 1 "$SUPERVISORS"); do
  "$bin/supervisor" --dispatcher "$endpoint" --id "sup$i" --children "$CHILDREN" \
    "${common[@]}" "${web_args[@]}" &
  pids+=($!)
done
status=0
wait "$dispatcher" || status=$?
for p in "${pids[@]:1}"; do wait "$p" 2>/dev/null || true; done

echo "== summary (store used: $kind)"
if [ -s "$run/summary.json" ]; then
  python3 -m json.tool "$run/summary.json"
fi
# The crawl's name (`--crawl-id`, given or the default): `pages` reads
# that crawl's collections.
crawl_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["crawl_id"])' \
  "$run/summary.json" 2>/dev/null || echo crawl)
echo "== the data, as WARC (pages export; read it with any WARC tool, e.g. scripts/warcio.sh index)"
# --restart: a resumed run may have stored pages after an earlier export.
CRAWLER_MONGO_URI="$uri" "$bin/pages" --crawl-id "$crawl_id" export --format warc --out "$run/warc" --restart ||
  status=$?
ls -l "$run/warc"/*.warc.gz 2>/dev/null || true
first=$(head -n 1 "$seeds")
echo "read a page back:"
if ! $keep; then
  echo "  export CRAWLER_MONGO_URI=\$(scripts/store.sh start $run/store --persist)   # the store again"
  uri='$CRAWLER_MONGO_URI'
fi
echo "  CRAWLER_MONGO_URI=$uri $bin/pages --crawl-id $crawl_id get '$first'      # --raw, --headers, --doc"
echo "  CRAWLER_MONGO_URI=$uri $bin/pages --crawl-id $crawl_id stats"
echo "run directory: $run  (timing logs: $run/logs, store data: $run/store/data, WARC: $run/warc)"
echo "go on with it later: scripts/crawl-local.sh --resume $run"
exit $status
