#!/usr/bin/env bash
# Lets a domain the circuit breaker halted crawl again.
#   scripts/unhalt.sh DOMAIN [DISPATCHER_DEBUG_URL]
# DISPATCHER_DEBUG_URL is the "debug on http://..." address the dispatcher
# printed at start (or $CRAWLER_DISPATCHER_DEBUG). The bearer token is
# $CRAWLER_DEBUG_TOKEN, else the run's token file ($CRAWLER_DEBUG_TOKEN_FILE,
# else ./debug_token: docs/steering.md).
set -euo pipefail
domain=${1:?usage: unhalt.sh DOMAIN [DISPATCHER_DEBUG_URL]}
url=${2:-${CRAWLER_DISPATCHER_DEBUG:?give the dispatcher debug URL}}
token=${CRAWLER_DEBUG_TOKEN:-}
token_file=${CRAWLER_DEBUG_TOKEN_FILE:-debug_token}
[ -z "$token" ] && [ -r "$token_file" ] && token=$(tr -d '[:space:]' <"$token_file")
auth=()
[ -n "$token" ] && auth=(-H "Authorization: Bearer $token")
curl -fsS -X POST "${auth[@]}" "$url/domains/unhalt?domain=$domain"
