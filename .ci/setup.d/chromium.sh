#!/usr/bin/env bash
# Debian's headless Chromium for the report's layout test (tests/results/test_report_browser.py:
# the report at a laptop's and a phone's width, failing when a table overflows). Only the
# package: the test starts Chromium itself, headless, with a fresh profile in its temporary
# directory. Idempotent: does nothing when a chromium binary is already there. Needs root (CI
# runs as root); otherwise it says how to install it and the test skips.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../apt.sh"
for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "chromium: already installed ($(dpkg-query -W -f='${Version}' chromium 2>/dev/null || echo "$(command -v "$bin")"))"
    exit 0
  fi
done
root_or_hint chromium "sudo apt-get install chromium (the report's browser test skips meanwhile)" "${1:-}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: installed $(dpkg-query -W -f='${Version}' chromium)"
