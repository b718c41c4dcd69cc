#!/usr/bin/env bash
# warcio, an independent WARC reader (the one researchers' tools build on),
# and cdxj-indexer, which writes the CDXJ indexes pywb reads, in their own
# virtualenv: the tests check `pages export --format warc` and its indexes
# with them.
#
#   scripts/warcio.sh install           # warcio and cdxj-indexer into .venv-warcio/ (from PyPI)
#   scripts/warcio.sh check FILE...     # any warcio command (check, index, recompress, ...)
#   .venv-warcio/bin/cdxj-indexer FILE  # cdxj-indexer's index of a WARC file
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_WARCIO_VENV:-$root/.venv-warcio}"
WARCIO_VERSION=1.8.1
CDXJ_INDEXER_VERSION=1.5.0

install() {
  if [ -x "$venv/bin/warcio" ] && [ -x "$venv/bin/cdxj-indexer" ]; then return 0; fi
  echo "warcio.sh: installing warcio $WARCIO_VERSION and cdxj-indexer $CDXJ_INDEXER_VERSION into $venv" >&2
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "warcio==$WARCIO_VERSION" "cdxj-indexer==$CDXJ_INDEXER_VERSION"
}

case "${1:-}" in
  install) install ;;
  "") echo "usage: $0 install | COMMAND [warcio args]" >&2; exit 2 ;;
  *) install; exec "$venv/bin/warcio" "$@" ;;
esac
