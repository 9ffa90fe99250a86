# Sourced by each .ci/setup.d/*.sh once it found its packages missing: what they all do next.
#
# root_or_hint NAME HINT [ARG]: with ARG `--check`, exit 1 (not installed); not root, say how to
# install them (HINT, on stderr) and exit 0 (their tests skip meanwhile); as root, return with
# apt set to run unattended, for the script to install its packages.
root_or_hint() {
  if [ "${3:-}" = "--check" ]; then
    exit 1  # not installed
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "$1: not root; install with: $2" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
}
