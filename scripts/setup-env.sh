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

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi

shopt -s nullglob
want="$(cat pyproject.toml plugins/*/pyproject.toml backends/*/pyproject.toml | sha256sum | cut -c1-16)-${extras}"
stamp=.venv/.arena-installed
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  spec=".[sim${extras:+,$extras}]"
  # The workspace: arena-core plus every plugin and backend package of this repository.
  packages=(-e "$spec")
  for dir in plugins/*/ backends/*/; do
    [ -f "${dir}pyproject.toml" ] && packages+=(-e "${dir%/}")
  done
  echo "installing arena-core [sim${extras:+,$extras}] with the workspace packages into .venv"
  .venv/bin/python -m pip install -q "${packages[@]}"
  echo "$want" > "$stamp"
fi
