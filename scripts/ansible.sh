#!/usr/bin/env bash
# Ansible for the playbooks in ansible/, in its own virtualenv.
#
#   scripts/ansible.sh install          # ansible-core into .venv-ansible/ (from PyPI)
#   scripts/ansible.sh PLAYBOOK ARGS... # run ansible-playbook from it, in ansible/
#
# The tests (tests/tests/ansible_e2e.rs) render the playbooks on this
# machine and run the crawl they describe.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_ANSIBLE_VENV:-$root/.venv-ansible}"
ANSIBLE_VERSION=2.19.14

install() {
  if [ -x "$venv/bin/ansible-playbook" ]; then return 0; fi
  echo "ansible.sh: installing ansible-core $ANSIBLE_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ansible-core==$ANSIBLE_VERSION"
}

case "${1:-}" in
  install) install ;;
  "") echo "usage: $0 install | PLAYBOOK [ansible-playbook args]" >&2; exit 2 ;;
  *) install; cd "$root/ansible"; exec "$venv/bin/ansible-playbook" "$@" ;;
esac
