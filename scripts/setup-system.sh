#!/usr/bin/env bash
# The Debian packages the test suite needs beyond Python, installed as root: Vulkan (ManiSkill's
# renderer), FFmpeg (LeRobot's video decoding), Chromium (the report's layout test), and Slurm +
# munge (backends/slurm's real-cluster tests, whose fixture starts the daemons itself, as root,
# in a temporary directory). Each is one script of .ci/setup.d/, idempotent: an installed
# package is left as it is.
#   scripts/setup-system.sh           # as root: install what is missing
#   scripts/setup-system.sh --check   # anyone: list what is missing (exit 1 when something is)
# `make test` runs it itself as root; otherwise it prints this one command to run once.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
scripts=(.ci/setup.d/*.sh)
if [ "${1:-}" = "--check" ]; then
  missing=()
  for script in "${scripts[@]}"; do
    bash "$script" --check >/dev/null 2>&1 || missing+=("$(basename "$script" .sh)")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "${missing[*]}"
    exit 1
  fi
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup-system.sh installs Debian packages: run it as root (sudo scripts/setup-system.sh)" >&2
  exit 1
fi
for script in "${scripts[@]}"; do
  bash "$script"
done
