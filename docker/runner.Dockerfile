# The arena runner image for the OSMO backend (launch.osmo.runner_image).
#
# It holds arena-core, every plugin and backend package of this repository, and MuJoCo with
# headless rendering: EGL on a GPU node (MUJOCO_GL=egl, the default the OSMO backend sets when
# launch.osmo.runner.gpu > 0) and OSMesa on a CPU node (runner.gpu: 0).
# OSMO runs `arena run-one`, `arena probe`, `python -m arena_osmo.runner_failure` and
# `gunzip` (a resumed runner's carried records) in it. Model servers run in their own images
# (each ServerTask names one); nothing here downloads weights.
#
# Build from the repository root (keep .venv and outputs out of the context, e.g. with a
# .dockerignore listing them) and push where your OSMO pool can pull from:
#   docker build -f docker/runner.Dockerfile -t REGISTRY/arena-runner:TAG .
#   docker push REGISTRY/arena-runner:TAG
FROM python:3.11-slim

# libegl1 + libgl1 (glvnd) for EGL; libosmesa6 for CPU rendering; git for VCS dependencies.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libegl1 libgl1 libglvnd0 libosmesa6 git ca-certificates \
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
    PIP_NO_CACHE_DIR=1

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

WORKDIR /workspace
CMD ["arena", "--help"]
