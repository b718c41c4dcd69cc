#!/usr/bin/env bash
# Ansible for the playbooks in ansible/, in its own virtualenv.
#
#   scripts/ansible.sh install          # ansible-core and ansible-lint into .venv-ansible/ (from PyPI)
#   scripts/ansible.sh lint             # ansible-lint --profile production, in ansible/
#   scripts/ansible.sh PLAYBOOK ARGS... # run ansible-playbook from it, in ansible/
#
# The tests (tests/tests/ansible_e2e.rs) render the playbooks on this
# machine and run the crawl they describe.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${CRAWLER_ANSIBLE_VENV:-$root/.venv-ansible}"
ANSIBLE_VERSION=2.19.14
# Needs nothing but PyPI: ansible/.ansible-lint sets `offline: true` (no
# galaxy, no schema refresh, no version check).
ANSIBLE_LINT_VERSION=26.10.1

install() {
  if [ -x "$venv/bin/ansible-playbook" ] && [ -x "$venv/bin/ansible-lint" ]; then return 0; fi
  echo "ansible.sh: installing ansible-core $ANSIBLE_VERSION and ansible-lint $ANSIBLE_LINT_VERSION into $venv" >&2
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "ansible-core==$ANSIBLE_VERSION" "ansible-lint==$ANSIBLE_LINT_VERSION"
}

case "${1:-}" in
  install) install ;;
  lint) install; cd "$root/ansible"; PATH="$venv/bin:$PATH" exec "$venv/bin/ansible-lint" --profile production ;;
  "") echo "usage: $0 install | lint | PLAYBOOK [ansible-playbook args]" >&2; exit 2 ;;
  *) install; cd "$root/ansible"; exec "$venv/bin/ansible-playbook" "$@" ;;
esac
