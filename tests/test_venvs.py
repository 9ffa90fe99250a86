"""Benchmark venvs: location, install arguments from the running installation, idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena import venvs


def test_location_follows_arena_venvs_then_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_VENVS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert venvs.venv_python("libero") == tmp_path / "data" / "arena" / "venvs" / "libero" / "bin" / "python"
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "v"))
    assert venvs.venv_dir("aloha") == tmp_path / "v" / "aloha"
    with pytest.raises(ValueError, match="invalid venv name"):
        venvs.venv_dir("../escape")


def test_arena_core_is_installed_as_it_is_installed_here():
    args = venvs.install_args("arena-core")
    checkout = Path(__file__).resolve().parents[1]
    # This suite runs from an editable install of the checkout (scripts/setup-env.sh).
    assert args == ["-e", str(checkout)]


def test_a_distribution_from_the_index_is_pinned_to_its_version():
    from importlib import metadata

    assert venvs.install_args("msgpack") == [f"msgpack=={metadata.version('msgpack')}"]
    with pytest.raises(venvs.VenvError, match="not installed"):
        venvs.install_args("no-such-distribution-arena-test")


def test_ensure_venv_installs_once_and_again_when_the_requirements_change(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    calls: list[list[str]] = []

    def fake_run(argv, quiet):
        calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            python = Path(argv[3]) / "bin" / "python"
            python.parent.mkdir(parents=True)
            python.write_text("")
            (Path(argv[3]) / "pyvenv.cfg").write_text("")

    monkeypatch.setattr(venvs, "_run", fake_run)
    python = venvs.ensure_venv("bench", requirements=["gym-aloha==0.1.5"], quiet=True)
    assert python == tmp_path / "bench" / "bin" / "python"
    assert [c[1:3] for c in calls] == [["-m", "venv"], ["-m", "pip"]]
    pip = calls[1]
    assert pip[pip.index("install") + 1 :] == ["-q", *venvs.install_args("arena-core"), "gym-aloha==0.1.5"]
    calls.clear()
    venvs.ensure_venv("bench", requirements=["gym-aloha==0.1.5"], quiet=True)
    assert calls == []  # the stamp matches: nothing to do
    venvs.ensure_venv("bench", requirements=["gym-aloha==0.1.6"], quiet=True)
    assert [c[1:3] for c in calls] == [["-m", "pip"]]  # same interpreter: updated in place
