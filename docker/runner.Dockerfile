# The arena runner image: the simulator side of a run (launch.osmo.runner_image; Slurm's
# launch.slurm.runner_image for the runner steps).
#
# It holds arena-core, every plugin and backend package of this repository, MuJoCo with
# headless rendering: EGL on a GPU node (MUJOCO_GL=egl, the default the OSMO backend sets when
# launch.osmo.runner.gpu > 0) and OSMesa on a CPU node (runner.gpu: 0), and the benchmark venvs
# of the environments whose workers run in their own interpreter, built with
# `arena venv setup NAME` under /opt/arena/venvs (ARENA_VENVS): aloha, kinetix, libero,
# maniskill, pusht (ARENA_RUNNER_VENVS below; about 7 GB together).
# Not in this image: the isaaclab and lerobot venvs (Isaac Lab, LeRobot's lerobot_env and
# `arena serve lerobot`): they need Python 3.12 and this image has 3.11. `arena run --dry-run`
# on OSMO (or on Slurm with a runner_image) names the runs that need them
# (arena.launch.runner_image); build an image with them for those runs.
# An OSMO runner task runs `arena node` (which waits for the run's policy server, then runs
# `arena run-one`) and `gunzip` (a resumed runner's carried records); its script first checks
# that `arena` is on PATH. Model servers run in their own images (each ServerTask names one);
# nothing here downloads weights.
#
# Build from the repository root (keep .venv, .venvs and outputs out of the context, e.g. with a
# .dockerignore listing them) and push where your OSMO pool can pull from:
#   docker build -f docker/runner.Dockerfile -t REGISTRY/arena-runner:TAG .
#   docker push REGISTRY/arena-runner:TAG
# A smaller image with only the venvs you need: --build-arg ARENA_RUNNER_VENVS="libero".
# ManiSkill renders through Vulkan: libvulkan1 is installed and the NVIDIA container runtime
# provides the GPU's driver ("graphics" capability); on a CPU node it needs Mesa's lavapipe
# (plugins/maniskill/README.md).
FROM python:3.11-slim

# libegl1 + libgl1 (glvnd) for EGL; libosmesa6 for CPU rendering; git for VCS dependencies.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libegl1 libgl1 libglvnd0 libosmesa6 libvulkan1 git ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Let glvnd find the NVIDIA EGL driver that the NVIDIA container runtime mounts when the
# "graphics" capability is requested.
RUN mkdir -p /usr/share/glvnd/egl_vendor.d \
 && printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}\n' \
      > /usr/share/glvnd/egl_vendor.d/10_nvidia.json
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics \
    MUJOCO_GL=egl \
    PYOPENGL_PLATFORM=egl \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    ARENA_VENVS=/opt/arena/venvs

WORKDIR /opt/arena
COPY pyproject.toml README.md LICENSE ./
COPY core ./core
COPY plugins ./plugins
COPY backends ./backends

# numpy stays below 2 because openpi-client pins it.
RUN echo 'numpy<2' > /tmp/constraints.txt \
 && pkgs="." \
 && for d in plugins/*/ backends/*/; do [ -f "$d/pyproject.toml" ] && pkgs="$pkgs ./$d"; done \
 && pip install -c /tmp/constraints.txt $pkgs \
 && arena plugins

# The benchmark venvs (arena.venvs; each: arena-core, its plugin from /opt/arena/plugins, the
# benchmark's pinned packages). Every one this Python can hold, unless the build argument says less.
ARG ARENA_RUNNER_VENVS="aloha kinetix libero maniskill pusht"
RUN arena venv setup $ARENA_RUNNER_VENVS

WORKDIR /workspace
CMD ["arena", "--help"]
