"""Benchmark venvs: location, install arguments from the running installation, idempotence."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from arena import venvs


def test_location_follows_arena_venvs_then_the_checkout_then_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_VENVS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "elsewhere" / ".venv"))  # not a checkout's
    assert venvs.venv_python("libero") == tmp_path / "data" / "arena" / "venvs" / "libero" / "bin" / "python"
    assert "the default" in venvs.venvs_location()[1]
    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(checkout / ".venv"))
    assert venvs.venvs_root() == tmp_path / "data" / "arena" / "venvs"  # no arena-core pyproject.toml
    (checkout / "pyproject.toml").write_text('[project]\nname = "arena-core"\n')
    root, why = venvs.venvs_location()
    assert root == checkout / ".venvs" and why == f"the checkout's .venvs: arena runs from {checkout / '.venv'}"
    (checkout / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    assert venvs.venvs_root() == tmp_path / "data" / "arena" / "venvs"
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "v"))
    assert venvs.venv_dir("aloha") == tmp_path / "v" / "aloha" and venvs.venvs_location()[1] == "$ARENA_VENVS"
    with pytest.raises(ValueError, match="invalid venv name"):
        venvs.venv_dir("../escape")


def test_this_suite_finds_the_venvs_in_the_checkout_without_arena_venvs(monkeypatch):
    """What `make test` builds (.venvs/ of the checkout) is where arena looks from .venv."""
    checkout = Path(__file__).resolve().parents[1]
    if Path(sys.prefix) != checkout / ".venv":
        pytest.skip(f"the suite runs from {sys.prefix}, not the checkout's .venv")
    monkeypatch.delenv("ARENA_VENVS", raising=False)
    assert venvs.venvs_root() == checkout / ".venvs"


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


def test_a_declaration_is_checked_when_the_plugin_is_imported():
    spec = venvs.VenvSpec(name="bench", python=">=3.11,<3.13", requirements=("torch==2.13.0", "numpy<2"))
    assert spec.accepts("3.12.4") and not spec.accepts("3.13.0") and spec.python_env == "ARENA_BENCH_PYTHON"
    assert spec.setup_command == "arena venv setup bench"
    assert venvs.VenvSpec(name="isaac-lab").python_env == "ARENA_ISAAC_LAB_PYTHON"
    for bad in ({"name": "../x"}, {"name": "b", "python": "3.12"}, {"name": "b", "requirements": ("numpy<<2",)}):
        with pytest.raises(ValidationError):
            venvs.VenvSpec(**bad)
    with pytest.raises(ValidationError, match="option 'full'"):
        venvs.VenvSpec(name="b", steps=(venvs.PipStep(args=("x",), option="full"),))


def test_extras_of_an_installed_distribution_are_installed_with_it():
    plain = venvs.install_args("arena-core")
    assert venvs.install_args("arena-core[video]") == [*plain[:-1], plain[-1] + "[video]"]
    from importlib import metadata

    assert venvs.install_args("msgpack[x]") == [f"msgpack[x]=={metadata.version('msgpack')}"]


def test_two_environments_may_share_a_venv_only_with_one_declaration():
    one = venvs.VenvSpec(name="bench", requirements=("a==1",))

    class A:
        default_venv = one

    class B:
        default_venv = venvs.VenvSpec(name="bench", requirements=("a==1",))

    class C:
        default_venv = venvs.VenvSpec(name="bench", requirements=("a==2",))

    class D:
        default_venv = "bench"

    assert venvs.declared_venvs({"b": B, "a": A, "none": object}) == {"bench": (one, ["b", "a"])}
    with pytest.raises(venvs.VenvError, match="declare different venvs named 'bench'"):
        venvs.declared_venvs({"a": A, "c": C})
    with pytest.raises(venvs.VenvError, match="must be an arena.venvs.VenvSpec"):
        venvs.declared_venvs({"d": D})


def test_a_servable_model_declares_a_venv_and_its_server_task_runs_in_it(tmp_path, monkeypatch):
    from arena.servertask import arena_server_task

    spec = venvs.VenvSpec(name="model", requirements=("torch==2.10.0",))

    class Model:  # a servable model's factory, as arena_register_servers registers it
        default_venv = spec

    class Env:
        default_venv = venvs.VenvSpec(name="model", requirements=("torch==2.13.0",))

    assert venvs.declared_venvs({}, {"mymodel": Model, "plain": object}) == {"model": (spec, ["arena serve mymodel"])}
    with pytest.raises(venvs.VenvError, match="env and arena serve mymodel declare different venvs named 'model'"):
        venvs.declared_venvs({"env": Env}, {"mymodel": Model})

    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    task = arena_server_task("mymodel", options={"path": "/ckpt"}, venv="model")
    assert "venv 'model', which does not exist" in task.missing_venv() and "arena venv setup model" in task.missing_venv()
    python = tmp_path / "model" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert task.missing_venv() is None
    argv = task.render(task.local_command, host="127.0.0.1", port=9, python=task.local_python())
    assert argv == [str(python), "-m", "arena", "serve", "mymodel", "--host", "127.0.0.1", "--port", "9", "-o", "path=/ckpt"]
    assert arena_server_task("mymodel").local_python() == sys.executable


def test_the_base_interpreter_must_satisfy_the_declared_python(tmp_path, monkeypatch):
    here = ".".join(map(str, sys.version_info[:3]))
    spec = venvs.VenvSpec(name="bench", python=f"=={here}")
    assert venvs.find_python(spec) == sys.executable
    assert venvs.find_python(spec, sys.executable) == sys.executable
    other = venvs.VenvSpec(name="bench", python="==2.1.*")
    with pytest.raises(venvs.VenvError, match=f"is Python {here}; the bench venv needs Python ==2.1"):
        venvs.find_python(other, sys.executable)
    with pytest.raises(venvs.NoPythonError, match=r"looked at \$ARENA_BENCH_PYTHON"):
        venvs.find_python(other)
    monkeypatch.setenv("ARENA_BENCH_PYTHON", sys.executable)
    assert venvs.python_candidates(spec)[0] == sys.executable


def test_setup_runs_the_declared_steps_as_their_options_and_checks_say(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    spec = venvs.VenvSpec(
        name="bench",
        requirements=("gym-aloha==0.1.5",),
        steps=(
            venvs.PipStep(args=("--no-deps", "lab==3.0.0"), unless_installed="lab==3.0.0", unless_option="full"),
            venvs.PipStep(args=("lab==3.0.0",), option="full"),
        ),
        options={"full": "everything"},
    )
    calls: list[list[str]] = []
    installed: dict[str, str] = {}
    monkeypatch.setattr(venvs, "ensure_venv", lambda name, **kw: calls.append(["ensure", name, *kw["requirements"]]) or tmp_path / name / "bin" / "python")
    monkeypatch.setattr(venvs, "_run", lambda argv, quiet: calls.append(argv[4:]))
    monkeypatch.setattr(venvs, "_satisfied", lambda python, req: req.name in installed)
    python = venvs.setup_venv(spec, quiet=True)
    assert python == tmp_path / "bench" / "bin" / "python"
    assert calls == [["ensure", "bench", "gym-aloha==0.1.5"], ["-q", "--no-deps", "lab==3.0.0"]]
    calls.clear()
    installed["lab"] = "3.0.0"
    venvs.setup_venv(spec, quiet=True)
    assert calls == [["ensure", "bench", "gym-aloha==0.1.5"]]  # the step's requirement is met
    calls.clear()
    venvs.setup_venv(spec, options=["full"])
    assert calls == [["ensure", "bench", "gym-aloha==0.1.5"], ["lab==3.0.0"]]
    with pytest.raises(venvs.VenvError, match="no set-up option fast"):
        venvs.setup_venv(spec, options=["fast"])


def test_setup_of_several_venvs_runs_jobs_at_a_time_and_reports_in_declaration_order(monkeypatch):
    import threading
    import time as _time

    from arena import venvs
    from arena.venvs import NoPythonError, VenvError, VenvSpec, setup_venvs

    specs = [VenvSpec(name=n) for n in ("slow", "broken", "py312", "fast")]
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def fake_setup(spec, **_):
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        try:
            _time.sleep({"slow": 0.3}.get(spec.name, 0.1))
            if spec.name == "broken":
                raise VenvError("pip failed")
            if spec.name == "py312":
                raise NoPythonError("no Python 3.12")
            return Path("/venvs") / spec.name / "bin" / "python"
        finally:
            with lock:
                running["now"] -= 1

    monkeypatch.setattr(venvs, "setup_venv", fake_setup)
    monkeypatch.setattr(venvs, "venv_python", lambda name: Path("/nonexistent") / name)
    results = setup_venvs(specs, jobs=3, if_possible=True)
    assert [spec.name for spec, _, _ in results] == ["slow", "broken", "py312", "fast"]
    assert [(str(path) if path else None, problem) for _, path, problem in results] == [
        ("/venvs/slow/bin/python", None), (None, "pip failed"), (None, "skipped: no Python 3.12"),
        ("/venvs/fast/bin/python", None),
    ]
    assert running["most"] == 3
    running["most"] = 0
    setup_venvs(specs, jobs=1, if_possible=True)
    assert running["most"] == 1


@pytest.mark.skipif(shutil.which("hardlink") is None, reason="util-linux's hardlink is not installed")
def test_identical_files_of_venvs_are_linked_after_a_set_up_that_built_one(tmp_path, monkeypatch):
    """The LeRobot and Isaac Lab venvs both hold torch's CUDA build: one copy on disk, not two.
    Only files with the same name, mode and bytes are linked; nothing is linked when no venv changed."""
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)  # leave the running venv out of it
    payload = bytes(range(256)) * 512  # 128 KiB, over the 64 KiB floor
    built: list[str] = []

    def fake_setup(spec, **_):
        site = tmp_path / spec.name / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        (site / "libtorch.so").write_bytes(payload)
        (site / "other-name.so").write_bytes(payload)
        (site / "differs.so").write_bytes(payload[:-1] + bytes([spec.name == "b"]))
        (tmp_path / spec.name / venvs.STAMP_NAME).write_text(spec.name)
        built.append(spec.name)
        return tmp_path / spec.name / "bin" / "python"

    monkeypatch.setattr(venvs, "setup_venv", fake_setup)
    said: list[str] = []
    venvs.setup_venvs([venvs.VenvSpec(name="a"), venvs.VenvSpec(name="b")], say=said.append, jobs=2)
    inode = {(v, f): (tmp_path / v / "site-packages" / f).stat().st_ino
             for v in "ab" for f in ("libtorch.so", "other-name.so", "differs.so")}
    assert inode["a", "libtorch.so"] == inode["b", "libtorch.so"]
    assert inode["a", "other-name.so"] == inode["b", "other-name.so"] != inode["a", "libtorch.so"]
    assert inode["a", "differs.so"] != inode["b", "differs.so"]
    assert (tmp_path / "b" / "site-packages" / "libtorch.so").read_bytes() == payload
    assert any(line.startswith("identical files of the venvs hard-linked:") for line in said)

    monkeypatch.setattr(venvs, "setup_venv", lambda spec, **_: tmp_path / spec.name / "bin" / "python")
    (tmp_path / "b" / "site-packages" / "late.so").write_bytes(payload)
    (tmp_path / "a" / "site-packages" / "late.so").write_bytes(payload)
    venvs.setup_venvs([venvs.VenvSpec(name="a"), venvs.VenvSpec(name="b")])  # no stamp changed
    late = [(tmp_path / v / "site-packages" / "late.so").stat().st_ino for v in "ab"]
    assert late[0] != late[1]
