#!/usr/bin/env bash
# Debian's headless Chromium for the report's layout test (tests/results/test_report_browser.py:
# the report at a laptop's and a phone's width, failing when a table overflows). Only the
# package: the test starts Chromium itself, headless, with a fresh profile in its temporary
# directory. Idempotent: does nothing when a chromium binary is already there. Needs root (CI
# runs as root); otherwise it says how to install it and the test skips.
set -euo pipefail
for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "chromium: already installed ($(dpkg-query -W -f='${Version}' chromium 2>/dev/null || echo "$(command -v "$bin")"))"
    exit 0
  fi
done
if [ "${1:-}" = "--check" ]; then
  exit 1  # not installed
fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium: not root; install with: sudo apt-get install chromium (the report's browser test skips meanwhile)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: installed $(dpkg-query -W -f='${Version}' chromium)"
