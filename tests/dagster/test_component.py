"""MeshProjectComponent through the `dg` CLI (dagster-dg-cli), in a dg project written by hand in a
temporary folder: `dg scaffold defs` writes defs.yaml (and, without --project, a new quickstart
project), `dg check defs` loads it, a bad key gets Dagster's own error naming it, and `dg dev`
serves the models' asset graph. No Spark: loading plans against the state store only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DG = str(Path(sys.executable).with_name("dg"))
COMPONENT = "mesh_dagster.MeshProjectComponent"

PYPROJECT = """[project]
name = "mesh_dg"
version = "0.1.0"
requires-python = ">=3.11"

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "mesh_dg"
# An installed mesh_dagster registers itself through the `dagster_dg_cli.registry_modules` entry
# point; naming the module here keeps the test independent of how it was installed.
registry_modules = ["mesh_dagster"]
"""

DEFINITIONS = """from pathlib import Path

from dagster import definitions, load_from_defs_folder


@definitions
def defs():
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


@pytest.fixture(scope="module")
def dg_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dg") / "mesh_dg"
    package = root / "src" / "mesh_dg"
    (package / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(DEFINITIONS)
    return root


def dg(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([DG, *args], cwd=root, env=_env(root), capture_output=True, text=True, timeout=timeout)


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(root / "src")]),
            "DAGSTER_HOME": str(root / ".dagster_home"), "NO_COLOR": "1", "COLUMNS": "200"}


def test_dg_lists_the_component(dg_project):
    proc = dg(dg_project, "list", "components", "--json")
    assert proc.returncode == 0, proc.stderr
    assert COMPONENT in {entry["key"] for entry in json.loads(proc.stdout)["items"]}


def test_scaffold_then_check_defs(dg_project):
    proc = dg(dg_project, "scaffold", "defs", COMPONENT, "mesh")
    assert proc.returncode == 0, proc.stderr
    folder = dg_project / "src" / "mesh_dg" / "defs" / "mesh"
    assert yaml.safe_load((folder / "defs.yaml").read_text()) == {
        "type": COMPONENT, "attributes": {"project": "project", "environments": ["prod"]}}
    assert (folder / "project" / "config.yaml").is_file()  # no --project: a new quickstart project
    assert (folder / "project" / "models" / "full_model.sql").is_file()

    check = dg(dg_project, "check", "defs")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "All definitions loaded successfully" in check.stdout + check.stderr

    listed = dg(dg_project, "list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr
    assets = {a["asset_key"] for a in json.loads(listed.stdout)["assets"]}
    assert assets == {"sqlmesh_example/seed_model", "sqlmesh_example/incremental_model", "sqlmesh_example/full_model"}


def test_scaffold_with_an_existing_project_and_environments(dg_project):
    existing = dg_project / "src" / "mesh_dg" / "defs" / "mesh" / "project"
    if not existing.is_dir():  # this test may run alone
        assert dg(dg_project, "scaffold", "defs", COMPONENT, "mesh").returncode == 0
    proc = dg(dg_project, "scaffold", "defs", COMPONENT, "mesh_dev", "--json-params",
              json.dumps({"project": "../mesh/project", "environments": ["dev"]}))
    assert proc.returncode == 0, proc.stderr
    folder = dg_project / "src" / "mesh_dg" / "defs" / "mesh_dev"
    assert yaml.safe_load((folder / "defs.yaml").read_text())["attributes"] == {
        "project": "../mesh/project", "environments": ["dev"]}
    assert not (folder / "project").exists()
    listed = dg(dg_project, "list", "defs", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assets = {a["asset_key"] for a in json.loads(listed.stdout)["assets"]}
    assert "sqlmesh_example__dev/full_model" in assets and "sqlmesh_example/full_model" in assets
    (folder / "defs.yaml").unlink()
    folder.rmdir()


def _check_with(dg_project: Path, text: str) -> subprocess.CompletedProcess:
    """`dg check defs` with the scaffolded component's defs.yaml replaced by `text` (then restored).

    The only component of its type: dg 1.13's YAML check validates one defs.yaml per component
    type (it keeps them in a dict by type), so a second one could hide the bad one."""
    path = dg_project / "src" / "mesh_dg" / "defs" / "mesh" / "defs.yaml"
    if not path.is_file():
        assert dg(dg_project, "scaffold", "defs", COMPONENT, "mesh").returncode == 0
    good = path.read_text()
    path.write_text(text)
    try:
        return dg(dg_project, "check", "defs")
    finally:
        path.write_text(good)


def test_an_unknown_key_is_refused_by_dagsters_validation(dg_project):
    proc = _check_with(dg_project, f"type: {COMPONENT}\n\nattributes:\n  project: project\n  environment: dev\n")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "defs/mesh/defs.yaml:5 - mesh_dagster.MeshProjectComponent attributes.environment Additional properties " \
           "are not allowed ('environment' was unexpected)" in out
    assert "Traceback" not in out


def test_an_unknown_translation_attribute_is_refused_by_name(dg_project):
    proc = _check_with(dg_project, f"type: {COMPONENT}\n\nattributes:\n  project: project\n  translation:\n"
                                   "    group: x\n")
    assert proc.returncode != 0
    # Dagster lets any attribute be a template string too, so its message for a bad translation block
    # reads "not valid under any of the given schemas", quoting the block and pointing at its line.
    out = proc.stdout + proc.stderr
    assert "defs/mesh/defs.yaml:5 - mesh_dagster.MeshProjectComponent attributes.translation {'group': 'x'} is not " \
           "valid under any of the given schemas" in out
    assert "   6 |     group: x" in out


def test_a_missing_project_is_one_line_naming_it(dg_project):
    proc = _check_with(dg_project, f"type: {COMPONENT}\n\nattributes:\n  project: no_such_project\n")
    assert proc.returncode != 0
    missing = dg_project / "src" / "mesh_dg" / "defs" / "mesh" / "no_such_project"
    assert f"Cannot load the mesh project {missing}: Project directory not found: {missing}" in \
        proc.stdout + proc.stderr


@pytest.mark.slow
def test_dg_dev_serves_the_asset_graph(dg_project):
    if not (dg_project / "src" / "mesh_dg" / "defs" / "mesh" / "defs.yaml").is_file():
        assert dg(dg_project, "scaffold", "defs", COMPONENT, "mesh").returncode == 0
    port = _free_port()
    proc = subprocess.Popen([DG, "dev", "--port", str(port)], cwd=dg_project, env=_env(dg_project),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        keys = _served_asset_keys(port, proc, deadline=time.monotonic() + 180)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert {"sqlmesh_example/full_model", "sqlmesh_example/incremental_model", "sqlmesh_example/seed_model"} <= keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


QUERY = '{"query": "{ assetNodes { assetKey { path } } }"}'


def _served_asset_keys(port: int, proc: subprocess.Popen, deadline: float) -> set[str]:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dg dev exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=QUERY.encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                nodes = json.loads(response.read())["data"]["assetNodes"]
            if nodes:
                return {"/".join(n["assetKey"]["path"]) for n in nodes}
        except (OSError, KeyError, TypeError, ValueError):
            pass
        time.sleep(1)
    raise AssertionError("dg dev did not serve the asset graph within 180 s")
