"""A YAML alias bomb fails fast, with a clear message and little memory.

The example of issue 17: a billion laughs in ``server.env``, ``server.fields`` or
``launch.slurm.setup`` made ``arena validate`` run for over a minute and take more than
2.5 GB, because error messages ``repr()``-ed whole values before shortening them. Here the
bomb expands to 9^9 (387 million) strings; ``arena validate`` runs under an address-space
limit so that a regression fails instead of exhausting the machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from arena.yaml_io import parse_yaml
from arena.errors import ConfigError

pytestmark = pytest.mark.slow


def _bomb(depth: int = 9) -> str:
    """An inline flow sequence nesting ``depth`` levels, each 9 aliases of the one below."""
    text = "&a0 [" + ", ".join(['"lol"'] * 9) + "]"
    for level in range(1, depth):
        text = f"&a{level} [{text}, " + ", ".join([f"*a{level - 1}"] * 8) + "]"
    return text


RUN = "environment: {type: metaworld, task: reach-v3}, policy: {type: metaworld_expert_remote}"
PLACES = {
    "server.env": f"runs:\n  a: {{{RUN}, server: {{env: {{X: {_bomb()}}}}}}}\n",
    "server.fields": f"runs:\n  a: {{{RUN}, server: {{fields: {{x: {_bomb()}}}}}}}\n",
    "launch.slurm.setup": f"launch: {{backend: slurm, slurm: {{setup: {_bomb()}}}}}\nruns:\n  a: {{{RUN}}}\n",
}

MEMORY_LIMIT = 3 * 1024**3  # bytes of address space for the `arena validate` process


@pytest.mark.parametrize("place", sorted(PLACES))
def test_alias_bomb_fails_fast_with_a_clear_message_and_little_memory(tmp_path, place):
    pytest.importorskip("arena_slurm")
    path = tmp_path / "bomb.yaml"
    path.write_text(PLACES[place])

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "validate", str(path)], cwd=tmp_path, preexec_fn=limit,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=120)  # a hang is a failure, not a slow pass
    finally:
        proc.kill()
    assert proc.returncode == 2, stderr[-2000:]
    assert "bomb.yaml" in stderr and "expands through aliases to more than" in stderr
    assert len(stderr) < 2000  # no value was rendered into the message


def test_values_shared_by_ordinary_aliases_still_load():
    data = parse_yaml("base: &b {num_envs: 2, seed: 0}\nruns: {a: {environment_builder: *b}, c: {environment_builder: *b}}\n")
    assert data["runs"]["a"]["environment_builder"] == {"num_envs": 2, "seed": 0}


def test_a_document_that_refers_to_itself_is_refused():
    with pytest.raises(ConfigError, match="refers to itself"):
        parse_yaml("runs: &r {a: *r}\n")


def test_messages_never_render_a_whole_value():
    from arena.errors import short_repr

    nested = [["x"] * 9] * 9
    for _ in range(6):
        nested = [nested] * 9  # 9^8 strings, shared
    text = short_repr(nested, 80)
    assert len(text) <= 80 and text.startswith("[[[")
