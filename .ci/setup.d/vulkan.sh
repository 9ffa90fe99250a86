#!/usr/bin/env bash
# Vulkan for ManiSkill3's rendering (plugins/maniskill: SAPIEN renders its cameras through
# Vulkan; on a machine without a GPU that is Mesa's lavapipe, a CPU Vulkan driver). Debian
# bookworm's own Mesa 22.3 lavapipe fails SAPIEN's device check ('Failed to find a supported
# physical device "cpu"'); Mesa 25.0 from bookworm-backports works with no variables. So this
# adds bookworm-backports to apt's sources (a deb822 file next to debian.sources, the same
# mirror and keyring) and installs libvulkan1 + mesa-vulkan-drivers from it.
# Idempotent: does nothing when a lavapipe of Mesa >= 25 is installed. Needs root (CI runs as
# root); otherwise it says how to install it, and the ManiSkill tests that render skip.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../apt.sh"
have_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true; }
installed="$(have_version)"
if [ -n "$installed" ] && dpkg --compare-versions "$installed" ge 25 \
   && ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 \
   && dpkg-query -W -f='${Status}' libvulkan1 2>/dev/null | grep -q 'install ok installed'; then
  echo "vulkan: already installed (mesa-vulkan-drivers $installed)"
  exit 0
fi
root_or_hint vulkan "echo 'deb http://deb.debian.org/debian bookworm-backports main'\
 | sudo tee /etc/apt/sources.list.d/bookworm-backports.list && sudo apt-get update\
 && sudo apt-get install -t bookworm-backports libvulkan1 mesa-vulkan-drivers\
 (ManiSkill's rendering tests skip meanwhile)" "${1:-}"
sources=/etc/apt/sources.list.d/bookworm-backports.sources
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  # The mirror the machine already uses for bookworm (deb822 debian.sources or a one-line list).
  mirror="$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*debian\)\/\{0,1\}$/\1/p' \
            /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)"
  if [ -z "$mirror" ]; then
    mirror="$(sed -n 's/^deb[[:space:]]\+\(http[^[:space:]]*debian\)\/\{0,1\}[[:space:]]\+bookworm[[:space:]].*/\1/p' \
              /etc/apt/sources.list 2>/dev/null | head -n1)"
  fi
  cat > "$sources" <<EOF
Types: deb
URIs: ${mirror:-http://deb.debian.org/debian}
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  echo "vulkan: added bookworm-backports ($sources)"
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends -t bookworm-backports \
  libvulkan1 mesa-vulkan-drivers >/dev/null
echo "vulkan: installed mesa-vulkan-drivers $(have_version) ($(ls /usr/share/vulkan/icd.d/lvp_icd*.json))"
