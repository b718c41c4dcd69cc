#!/usr/bin/env bash
# Lets a domain the circuit breaker halted crawl again.
#   scripts/unhalt.sh DOMAIN [DISPATCHER_DEBUG_URL]
# DISPATCHER_DEBUG_URL is the "debug on http://..." address the dispatcher
# printed at start (or $CRAWLER_DISPATCHER_DEBUG); $CRAWLER_DEBUG_TOKEN is sent
# as a bearer token when set.
set -euo pipefail
domain=${1:?usage: unhalt.sh DOMAIN [DISPATCHER_DEBUG_URL]}
url=${2:-${CRAWLER_DISPATCHER_DEBUG:?give the dispatcher debug URL}}
auth=()
[ -n "${CRAWLER_DEBUG_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $CRAWLER_DEBUG_TOKEN")
curl -fsS -X POST "${auth[@]}" "$url/domains/unhalt?domain=$domain"
