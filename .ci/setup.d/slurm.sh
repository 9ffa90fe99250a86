#!/usr/bin/env bash
# A one-node Slurm for backends/slurm's tests: Debian's slurmctld, slurmd, slurm-client and
# munge. Only the packages: the test fixture (backends/slurm/tests/conftest.py) writes its own
# slurm.conf and munge key into a temporary directory and starts/stops the daemons itself.
# Idempotent: does nothing when the binaries are already there. Needs root (CI runs as root).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../apt.sh"
need=(slurmctld slurmd sbatch munged)
missing=0
for bin in "${need[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing=1
done
if [ "$missing" = 0 ]; then
  echo "slurm: already installed ($(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo "from PATH"))"
  exit 0
fi
root_or_hint slurm "sudo apt-get install slurmctld slurmd slurm-client munge" "${1:-}"
apt-get update -qq
# The packages' own services are not started here (no systemd in CI containers): policy-rc.d
# keeps invoke-rc.d from trying, the fixture runs the daemons in the foreground itself.
restore_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  restore_policy=1
fi
apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
[ "$restore_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
echo "slurm: installed $(dpkg-query -W -f='${Version}' slurmctld)"
