"""Every distribution of this repository is releasable as declared, and the hints that install
them work before the first release. (scripts/check_wheels.py, run by CI, builds and installs
each one alone; these are the fast checks of what it relies on.)"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from arena import distributions
from arena.distributions import install_hint

REPO = Path(__file__).resolve().parents[1]
PROJECTS = [REPO / "pyproject.toml", *sorted(REPO.glob("plugins/*/pyproject.toml")), *sorted(REPO.glob("backends/*/pyproject.toml"))]
IDS = [str(p.parent.relative_to(REPO)) for p in PROJECTS]


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text())["project"]


def _check_wheels():
    spec = importlib.util.spec_from_file_location("check_wheels", REPO / "scripts" / "check_wheels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_wheels"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", PROJECTS, ids=IDS)
def test_every_distribution_declares_what_an_index_shows(path):
    project = _project(path)
    folder = path.parent
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    assert (folder / project["readme"]).is_file()
    assert set(project["urls"]) >= {"Homepage", "Source", "Issues", "Documentation"}
    root_urls = _project(REPO / "pyproject.toml")["urls"]
    assert project["urls"]["Homepage"] == root_urls["Homepage"] and project["urls"]["Issues"] == root_urls["Issues"]
    assert project["requires-python"] == ">=3.11"
    versions = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")}
    assert versions == {"3.11", "3.12"}
    assert not any(c.startswith("License ::") for c in project["classifiers"]), "the license expression says it"


@pytest.mark.parametrize("path", PROJECTS, ids=IDS)
def test_every_dependency_has_a_lower_bound(path):
    """The floors are what scripts/check_wheels.py installs, so each one is a version that ran."""
    project = _project(path)
    requirements = [*project["dependencies"], *(r for extra in project.get("optional-dependencies", {}).values() for r in extra)]
    for text in requirements:
        req = Requirement(text)
        if canonicalize_name(req.name) == canonicalize_name(project["name"]):
            continue  # an extra of itself, e.g. arena-core[metaworld,kitchen,video]
        assert any(s.operator in (">=", "==", "~=") for s in req.specifier), f"{project['name']}: {text} has no lower bound"


def test_every_package_of_the_checkout_is_known_to_the_install_hints():
    for path in PROJECTS:
        folder = path.parent.relative_to(REPO).as_posix()
        assert distributions.FOLDERS[canonicalize_name(_project(path)["name"])] == (folder if folder != "." else ".")


def test_before_the_first_release_a_hint_installs_from_the_repository(monkeypatch):
    monkeypatch.setattr(distributions, "repository_url", lambda: "https://example.org/arena")
    hint = install_hint("arena-plugin-openpi>=0.1")
    assert "pip install ./plugins/openpi" in hint
    assert "pip install 'arena-plugin-openpi @ git+https://example.org/arena#subdirectory=plugins/openpi'" in hint
    assert install_hint("numpy>=1.24") == "pip install 'numpy>=1.24'"
    monkeypatch.setattr(distributions, "ON_PYPI", True)
    assert install_hint("arena-plugin-openpi>=0.1") == "pip install 'arena-plugin-openpi>=0.1'"


def test_the_repository_url_comes_from_arena_cores_metadata():
    assert distributions.repository_url() == _project(REPO / "pyproject.toml")["urls"]["Source"]


def test_an_experiment_needing_a_missing_plugin_says_how_to_install_it(tmp_path, monkeypatch):
    import importlib.metadata

    from arena.config import load_experiment
    from arena.config import requires as requires_module
    from arena.errors import ConfigError

    real = importlib.metadata.version

    def version(dist: str) -> str:
        if dist == "arena-plugin-gr00t":
            raise importlib.metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(requires_module, "version", version)
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        "requires: {arena-plugin-gr00t: '>=0.1'}\n"
        "runs:\n  a: {environment: {type: metaworld, task: reach-v3}, policy: {type: zero_action}}\n"
    )
    with pytest.raises(ConfigError, match=r"not installed: pip install \./plugins/gr00t .*#subdirectory=plugins/gr00t"):
        load_experiment(exp)


def test_the_wheel_check_pins_each_install_at_the_declared_floors():
    check = _check_wheels()
    dists = check.discover(REPO)
    by_key = {d.key: d for d in dists}
    assert [d.key for d in dists][0] == "arena-core" and "arena-plugin-cosmos" in by_key
    cosmos = by_key["arena-plugin-cosmos"]
    assert cosmos.tests and not by_key["arena-backend-slurm"].tests
    lines = check.floor_constraints(check.closure(cosmos, ["test"], by_key), by_key)
    pins = dict(line.split("==") for line in lines)
    assert pins["arena-core"] == _project(REPO / "pyproject.toml")["version"]
    declared = {canonicalize_name(Requirement(r).name): Requirement(r) for r in _project(REPO / "pyproject.toml")["dependencies"]}
    for name in ("numpy", "pydantic", "typer"):
        floor = min(s.version for s in declared[name].specifier if s.operator == ">=")
        assert pins[name] == floor
    assert "mujoco" in pins and "pytest" in pins  # through arena-core[kitchen] and the test extra
    assert SpecifierSet(str(declared["numpy"].specifier)).contains(pins["numpy"])


def test_the_wheel_check_validates_each_package_with_its_own_examples():
    check = _check_wheels()
    by_key = {d.key: d for d in check.discover(REPO)}
    assert [p.name for p in check.examples_for(by_key["arena-plugin-cosmos"], by_key)] == ["cosmos_droid_kitchen.yaml"]
    assert "quickstart.yaml" in [p.name for p in check.examples_for(by_key["arena-core"], by_key)]
    assert "pi0_and_cosmos.yaml" not in [p.name for p in check.examples_for(by_key["arena-plugin-openpi"], by_key)]
