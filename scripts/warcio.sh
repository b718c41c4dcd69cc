#!/usr/bin/env bash
# warcio, an independent WARC reader (the one researchers' tools build on),
# in its own virtualenv: the tests check `pages export --format warc` with it.
#
#   scripts/warcio.sh install           # warcio into .venv-warcio/ (from PyPI)
#   scripts/warcio.sh check FILE...     # any warcio command (check, index, recompress, ...)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_WARCIO_VENV:-$root/.venv-warcio}"
WARCIO_VERSION=1.8.1

install() {
  if [ -x "$venv/bin/warcio" ]; then return 0; fi
  echo "warcio.sh: installing warcio $WARCIO_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "warcio==$WARCIO_VERSION"
}

case "${1:-}" in
  install) install ;;
  "") echo "usage: $0 install | COMMAND [warcio args]" >&2; exit 2 ;;
  *) install; exec "$venv/bin/warcio" "$@" ;;
esac
