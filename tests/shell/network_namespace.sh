# tests/shell/network_namespace.sh — sourced by the tests that need a network of their own
# (link_cut.sh, degraded_link.sh):
#
#   reenter_in_network_namespace NAME COMMAND... -- "$@"
#
# Runs the calling script again, with its arguments, inside a new user and network namespace
# (unshare -rn): there it may bring links down and create devices that nothing else on the
# machine sees. Returns at once when already inside. Exits 77 (skipped), saying why in NAME's
# words, where the machine refuses unprivileged namespaces or a COMMAND the test needs is missing.
reenter_in_network_namespace() {
  local name=$1 commands=() command
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do commands+=("$1"); shift; done
  shift  # the --
  [ "${BAREYOLO_TEST_IN_NETWORK_NAMESPACE:-}" = 1 ] && return 0
  if ! unshare -rn true 2> /dev/null; then
    echo "$name: skipped: this machine refuses unprivileged network namespaces (unshare -rn)"
    exit 77
  fi
  for command in "${commands[@]}"; do
    command -v "$command" > /dev/null && continue
    echo "$name: skipped: no '$command' command (ip, ss: iproute2; nsenter: util-linux)"
    exit 77
  done
  exec env BAREYOLO_TEST_IN_NETWORK_NAMESPACE=1 unshare -rn "$0" "$@"
}
