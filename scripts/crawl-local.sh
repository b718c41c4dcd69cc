#!/usr/bin/env bash
# Sets up and runs a real crawl on this machine: builds release binaries,
# starts a store, one dispatcher and two supervisors with two crawler
# children each, shows live progress and ends with a summary.
#
#   scripts/crawl-local.sh                      # crawl the built-in synthetic web (no internet needed)
#   scripts/crawl-local.sh seeds.txt [FLAGS]    # crawl these seeds; FLAGS go to the dispatcher
#
# Environment: SUPERVISORS (2), CHILDREN (2), WEB_HOSTS (40), WEB_PAGES (100) for the synthetic web.
# Everything of a run (store data, timing logs, summary) is kept in runs/<time>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SUPERVISORS=${SUPERVISORS:-2}
CHILDREN=${CHILDREN:-2}
run="runs/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run/logs"
bin="$root/target/release"
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/store.sh stop "$run/store"
}
trap cleanup EXIT

echo "== building release binaries"
cargo build --release --workspace --bins

echo "== starting the store"
uri=$(scripts/store.sh start "$run/store" --persist)
kind=$(cat "$run/store/kind")

seeds=${1:-}
[ $# -gt 0 ] && shift
web_args=()
policy=()
if [ -z "$seeds" ]; then
  echo "== starting the synthetic web (${WEB_HOSTS:-40} hosts x ${WEB_PAGES:-100} pages)"
  "$bin/synthweb" --hosts "${WEB_HOSTS:-40}" --pages-per-host "${WEB_PAGES:-100}" \
    --crawl-delay-every 10 --crawl-delay-secs 0.1 \
    --write-seeds "$run/seeds.txt" --write-hosts "$run/hosts" >"$run/synthweb.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q listening "$run/synthweb.out" 2>/dev/null && break; sleep 0.1; done
  cat "$run/synthweb.out"
  seeds="$run/seeds.txt"
  web_args=(--hosts-file "$run/hosts")
  # Our own server on loopback: a short politeness delay is fine.
  policy=(--min-delay-ms 10)
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
endpoint="tcp://127.0.0.1:$port"
common=(--mongo-uri "$uri" --timing-log "$run/logs/")
# A fresh cluster secret for this run, in a file only we can read; the
# processes get its path (the secret itself never goes on a command line).
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(32))' >"$run/cluster_secret")
common+=(--cluster-secret-file "$run/cluster_secret")

echo "== crawling (store: $kind at $uri; logs in $run/logs)"
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
echo "== the data, as WARC (pages export; read it with any WARC tool, e.g. scripts/warcio.sh index)"
CRAWLER_MONGO_URI="$uri" "$bin/pages" export --format warc --out "$run/warc" || status=$?
ls -l "$run/warc"/*.warc.gz 2>/dev/null || true
first=$(head -n 1 "$seeds")
echo "read a page back (with the store running again: scripts/store.sh start $run/store ${uri##*:} --persist):"
echo "  CRAWLER_MONGO_URI=$uri $bin/pages get '$first'      # --raw, --headers, --doc"
echo "  CRAWLER_MONGO_URI=$uri $bin/pages stats"
echo "run directory: $run  (timing logs: $run/logs, store data: $run/store/data, WARC: $run/warc)"
exit $status
