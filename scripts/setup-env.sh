#!/usr/bin/env bash
# Prepare this checkout on a fresh machine: system libraries for headless MuJoCo rendering,
# then a virtual environment in .venv with arena-core installed editable, with its built-in
# simulators and video encoding (extra `sim`) and the given extras. Safe to run again: it only
# installs what changed.
#   scripts/setup-env.sh            # what `arena run` needs
#   scripts/setup-env.sh test       # plus the test suite's dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"

# Headless rendering: MuJoCo renders through OSMesa on machines without a GPU.
if ! ldconfig -p 2>/dev/null | grep -q libOSMesa; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing libosmesa6 (headless MuJoCo rendering)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libosmesa6 >/dev/null) \
      || echo "warning: could not install libosmesa6; camera observations will not render" >&2
  else
    echo "warning: libOSMesa is missing; run 'sudo apt-get install libosmesa6' for camera observations" >&2
  fi
fi

# The test suite's Debian packages (Vulkan, FFmpeg, Chromium, Slurm + munge: scripts/setup-system.sh,
# one .ci/setup.d script each). As root they are installed here, as libosmesa6 is; otherwise the
# one command that installs them is printed, and the tests that need them skip naming it.
if [[ ",${extras}," == *",test,"* ]]; then
  if [ "$(id -u)" = 0 ]; then
    scripts/setup-system.sh || echo "warning: scripts/setup-system.sh failed; the tests that need its packages will skip or fail" >&2
  elif ! missing="$(scripts/setup-system.sh --check)"; then
    echo "warning: not installed: ${missing}; run once: sudo scripts/setup-system.sh (the tests that need them skip meanwhile)" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi

shopt -s nullglob
# The stamp holds the packages' hash and the extras installed so far. An environment with more
# extras serves a request for fewer, so `make quickstart` after `make test` installs nothing; a
# request for more installs the union, so alternating the two installs once.
hash="$(cat pyproject.toml plugins/*/pyproject.toml backends/*/pyproject.toml | sha256sum | cut -c1-16)"
stamp=.venv/.arena-installed
have_hash="" have_extras=""
[ -f "$stamp" ] && read -r have_hash have_extras < "$stamp" || true
union="$(printf '%s\n' ${have_extras//,/ } ${extras//,/ } | sed '/^$/d' | sort -u | paste -sd, -)"
if [ "$have_hash" != "$hash" ] || [ "$union" != "$have_extras" ]; then
  spec=".[sim${union:+,$union}]"
  # The workspace: arena-core plus every plugin and backend package of this repository.
  # backends/ray brings `ray` itself (the core package, ~270 MB, no [default]/[client] extras:
  # no dashboard, no client server), which its tests need for their loopback cluster.
  packages=(-e "$spec")
  for dir in plugins/*/ backends/*/; do
    [ -f "${dir}pyproject.toml" ] && packages+=(-e "${dir%/}")
  done
  echo "installing arena-core [sim${union:+,$union}] with the workspace packages into .venv"
  # setuptools' "Editable installation" banner (one per flat-layout package, 13 lines each)
  # passes `pip -q` as a warning of the build backend: it says nothing about this checkout.
  PYTHONWARNINGS="ignore:Editable installation${PYTHONWARNINGS:+,$PYTHONWARNINGS}" \
    .venv/bin/python -m pip install -q "${packages[@]}"
  echo "$hash $union" > "$stamp"
fi

# Benchmark venvs (docs/architecture.md, "Benchmark venvs"): with the test extras, every venv
# an installed environment declares (ALOHA, LIBERO, Isaac Lab, ...) is created by the one
# command, in .venvs/ of this checkout: where arena itself looks when it runs from this .venv
# ($ARENA_VENVS, when set, wins), and where the test suite's conftest.py looks, so the suite
# and the README's commands use the same venvs. Idempotent. A venv whose Python this machine
# lacks (Isaac Lab needs 3.12) is skipped with the reason; its tests then skip and say so.
if [[ ",${extras}," == *",test,"* ]]; then
  # Three at a time: on a fresh machine the time is mostly downloads (torch wheels), which overlap.
  echo "benchmark venvs: arena venv setup"
  .venv/bin/arena venv setup --if-possible --quiet --jobs 3
fi
