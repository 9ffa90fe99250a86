"""The openpi server task: openpi's ``scripts/serve_policy.py`` for the client's checkpoint.

Command (``reference/isaaclab-arena.md`` section 3.1)::

    uv run scripts/serve_policy.py --port=P policy:checkpoint --policy.config=CFG --policy.dir=DIR

run in an openpi checkout (``/app`` in the server image), one GPU, with
``XLA_PYTHON_CLIENT_MEM_FRACTION=0.5``. The checkpoint follows the client's
``policy_variant`` and ``embodiment``, so pi0 and pi05 runs each get a matching server. The
first start downloads the checkpoint (about 11 GB for DROID) and the first request compiles
the model, so ``startup_timeout_s`` is 30 minutes (the client's ``first_request_timeout_s``
is 15 minutes and its ``ping_timeout_s`` 300 s).

Override any part per run with the run's ``server:`` key, e.g. ``server: {fields:
{openpi_dir: /opt/openpi}}`` for the local backend, or ``server: {image: ...}``.

openpi's server always binds 0.0.0.0 and has no authentication (it ignores the
``Authorization`` header; ``reference/protocols.md`` section 2.1): the launch backends report
it as exposed without a key.
"""

from __future__ import annotations

from arena.errors import ConfigError
from arena.servertask import ServerResources, ServerTask

#: openpi publishes no server image: a container backend needs the user's own, built from
#: openpi's ``scripts/docker/serve_policy.Dockerfile`` (the checkout at /app).
OPENPI_IMAGE_HINT = (
    "openpi publishes no server image: build one from an openpi checkout with "
    "scripts/docker/serve_policy.Dockerfile (it puts openpi at /app) and push it to a registry the cluster can pull from"
)

#: (embodiment, policy_variant) -> (openpi training config, checkpoint directory).
CHECKPOINTS: dict[tuple[str, str], tuple[str, str]] = {
    ("droid", "pi05"): ("pi05_droid_jointpos_polaris", "gs://openpi-assets-simeval/pi05_droid_jointpos"),
    ("droid", "pi0"): ("pi0_droid_jointpos_polaris", "gs://openpi-assets-simeval/pi0_droid_jointpos"),
    ("libero", "pi05"): ("pi05_libero", "gs://openpi-assets/checkpoints/pi05_libero"),
    ("libero", "pi0"): ("pi0_libero", "gs://openpi-assets/checkpoints/pi0_libero"),
    ("aloha", "pi0"): ("pi0_aloha_sim", "gs://openpi-assets/checkpoints/pi0_aloha_sim"),
}

_SERVE = [
    "scripts/serve_policy.py",
    "--port={port}",
    "policy:checkpoint",
    "--policy.config={policy_config}",
    "--policy.dir={policy_dir}",
]


def openpi_server_task(config) -> ServerTask:
    """The ServerTask serving ``config``'s checkpoint (a :class:`~arena_openpi.policy.Pi0RemoteConfig`).

    Raises:
        ConfigError: no published checkpoint is known for the embodiment and variant.
    """
    key = (config.embodiment, config.policy_variant)
    if key not in CHECKPOINTS:
        known = ", ".join(f"{e}/{v}" for e, v in CHECKPOINTS)
        raise ConfigError(
            f"no openpi checkpoint is known for embodiment '{key[0]}' and policy_variant '{key[1]}' "
            f"(known: {known}); run the server yourself and set `server: {{external: true}}`"
        )
    policy_config, policy_dir = CHECKPOINTS[key]
    return ServerTask(
        name=f"openpi-{config.policy_variant}-{config.embodiment}",
        image=None,
        image_hint=OPENPI_IMAGE_HINT,
        command=["uv", "run", "--directory", "/app", *_SERVE],
        local_command=["uv", "run", "--directory", "{openpi_dir}", *_SERVE],
        port=8000,
        readiness="websocket",
        startup_timeout_s=1800.0,
        resources=ServerResources(cpu=4, gpu=1, memory=32.0, storage=50.0),  # checkpoint download, JAX caches
        env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"},
        shareable=True,
        checkpoint="{policy_dir}",
        bind="0.0.0.0",  # serve_policy.py has no host option (openpi scripts/serve_policy.py)
        fields={"policy_config": policy_config, "policy_dir": policy_dir, "openpi_dir": "openpi"},
    )
