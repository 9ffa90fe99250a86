"""Who can reach a server: the bind decision, the key decision, and who listens on a port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from arena.launch.exposure import GENERATED_KEY_ENV, decide_exposure, generate_key, is_loopback
from arena.launch.listeners import foreign_listeners, listeners
from arena.servertask import ServerOverrides, ServerTask

ARENA_SERVE = ["{python}", "-m", "arena", "serve", "m", "--host", "{host}", "--port", "{port}"]
KEYED = ServerTask(name="arena-m", local_command=ARENA_SERVE, api_key_args=["--api-key-env", "{api_key_env}"])
OPENPI = ServerTask(name="openpi", local_command=["uv", "run", "scripts/serve_policy.py", "--port={port}"])


@pytest.mark.parametrize(("address", "loopback"), [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                                   ("localhost", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                                   ("node17", False)])
def test_only_loopback_addresses_count_as_unexposed(address, loopback):
    assert is_loopback(address) is loopback


def test_arenas_own_server_gets_a_generated_key_when_exposed_and_none_on_loopback():
    exposed = decide_exposure(KEYED, KEYED.local_command, "0.0.0.0", None)
    assert (exposed.exposed, exposed.key, exposed.server_key_env, exposed.client_key_env) == (
        True, "generated", GENERATED_KEY_ENV, GENERATED_KEY_ENV,
    )
    loopback = decide_exposure(KEYED, KEYED.local_command, "127.0.0.1", None)
    assert (loopback.exposed, loopback.key, loopback.authenticated) == (False, "none", False)
    assert "loopback" in loopback.describe()


def test_the_users_key_wins_and_a_server_without_auth_is_described_as_such():
    user = decide_exposure(KEYED, KEYED.local_command, "127.0.0.1", "MY_KEY")
    assert (user.key, user.server_key_env) == ("user", "MY_KEY")
    openpi = decide_exposure(OPENPI, OPENPI.local_command, "127.0.0.1", "MY_KEY")
    # openpi's serve_policy.py has no host option: it binds 0.0.0.0 whatever the backend asks
    assert (openpi.bind, openpi.exposed, openpi.key, openpi.client_key_env) == ("0.0.0.0", True, "none", "MY_KEY")
    assert "WITHOUT authentication ('openpi' cannot require an API key)" in openpi.describe()


def test_key_arguments_are_rendered_with_the_variable_name_never_a_value():
    argv = KEYED.render(KEYED.local_command, host="0.0.0.0", port=9, python="py", api_key_env=GENERATED_KEY_ENV)
    assert argv[-2:] == ["--api-key-env", GENERATED_KEY_ENV]
    already = ServerTask(name="x", local_command=[*ARENA_SERVE, "--api-key-env", "K"], api_key_args=["--api-key-env", "{api_key_env}"])
    assert already.render(already.local_command, host="h", port=1, api_key_env="K").count("--api-key-env") == 1
    with pytest.raises(ValueError, match="cannot require an API key"):
        OPENPI.render(OPENPI.local_command, host="h", port=1, api_key_env="K")
    assert len(generate_key()) == 64 and generate_key() != generate_key()


def test_replacing_a_command_drops_the_key_arguments_that_belonged_to_the_old_one():
    replaced = ServerOverrides(local_command=["my-server", "--port", "{port}"]).apply(KEYED)
    assert replaced.api_key_args is None
    declared = ServerOverrides(local_command=["my-server"], api_key_args=["--token-env", "{api_key_env}"]).apply(KEYED)
    assert declared.api_key_args == ["--token-env", "{api_key_env}"]
    assert ServerOverrides(startup_timeout_s=5).apply(KEYED).api_key_args == KEYED.api_key_args
    assert ServerOverrides(gpus=[1, 3]).apply(KEYED).gpus == ["1", "3"]


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc")
def test_a_listener_is_ours_when_it_belongs_to_the_process_group_and_foreign_otherwise():
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        port = mine.getsockname()[1]
        assert any(entry.address == "127.0.0.1" for entry in listeners(port))
        assert foreign_listeners(port, os.getpid(), "127.0.0.1") == []
        # From the point of view of a process arena started (a child), this socket is foreign.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
        try:
            time.sleep(0.1)
            (other,) = foreign_listeners(port, child.pid, "127.0.0.1")
            assert other.pid == os.getpid() and "python" in (other.command or "")
            assert f"pid {os.getpid()}" in other.describe()
        finally:
            child.kill()
            child.wait()
    assert foreign_listeners(port, os.getpid(), "127.0.0.1") == []  # closed: nothing listens
