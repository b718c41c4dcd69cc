#!/usr/bin/env bash
# pywb, the replay tool researchers open a web archive with, in its own
# virtualenv: the tests replay `pages export --format warc` in it (see
# docs/replay.md for the researcher's path).
#
#   scripts/pywb.sh install              # pywb into .venv-pywb/ (from PyPI)
#   scripts/pywb.sh wayback -p 8080      # any of pywb's commands (wayback, wb-manager, ...)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_PYWB_VENV:-$root/.venv-pywb}"
PYWB_VERSION=2.10.0

install() {
  if [ -x "$venv/bin/wayback" ] && [ -x "$venv/bin/wb-manager" ]; then return 0; fi
  echo "pywb.sh: installing pywb $PYWB_VERSION into $venv" >&2
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "pywb==$PYWB_VERSION"
}

case "${1:-}" in
  install) install ;;
  "") echo "usage: $0 install | COMMAND [args]" >&2; exit 2 ;;
  *) install; cmd=$1; shift; exec "$venv/bin/$cmd" "$@" ;;
esac
