"""Project files that lead outside the project (a symbolic link, a seed `path` with `..` or an absolute
one, a unit test's fixture file) are refused at load, in one line naming the file and where it leads,
with nothing of the target read or shown (issue 34, point 9: a seed linked to `/etc/passwd` showed its
first line in the error, so a pushed branch could read the Dagster host's files). Links that stay
inside the project keep working."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from bad_input.harness import assert_refused, copy_example, mesh, nothing_written
from mesh_dagster.core.errors import UnitTestError
from mesh_dagster.core.project.project import load_project
from mesh_dagster.testing.definition import load_tests

SECRET = "root:x:0:0:host-secret-line"
SEED_MODEL = "models/seed_model.sql"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder of the host outside the project: a file a branch must not reach, and a folder of them."""
    folder = tmp_path / "host"
    (folder / "dir").mkdir(parents=True)
    for path in (folder / "secret.csv", folder / "dir" / "secret.sql"):
        path.write_text(f"{SECRET}\nsecond,line\n")
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = copy_example(tmp_path / "project")
    (root / ".mesh").mkdir()  # where the refusal's log file goes (ours, not the user's data)
    return root


def _link(project: Path, rel: str, target: Path) -> None:
    path = project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        path.rmdir()
    path.unlink(missing_ok=True)
    path.symlink_to(target)


def _refused(project: Path, *fragments: str) -> str:
    with nothing_written(project):
        outcome = mesh(project, "plan", "--explain")
    line = assert_refused(outcome, *fragments)
    assert SECRET not in outcome.stdout + outcome.stderr and "host-secret" not in line
    return line


@pytest.mark.parametrize("rel, target", [
    ("seeds/seed_data.csv", "secret.csv"),  # the case
    ("models/linked.sql", "dir/secret.sql"),
    ("models/linked.py", "secret.csv"),
    ("models/nested/deeper/linked.sql", "dir/secret.sql"),
    ("models/shared", "dir"),  # a folder
    ("audits/linked.sql", "dir/secret.sql"),
    ("macros/linked.py", "secret.csv"),
    ("macros/linked.sql", "dir/secret.sql"),  # Jinja macros
    ("signals/linked.py", "secret.csv"),
    ("materializations/linked.py", "secret.csv"),
    ("tests/test_linked.yaml", "secret.csv"),
    ("external_models.yaml", "secret.csv"),
    ("external_models/linked.yaml", "secret.csv"),
    ("audits", "dir"),  # a whole folder the loader reads
    ("config.yaml", "secret.csv"),
])
def test_a_link_leading_outside_the_project_is_refused(project: Path, host: Path, rel: str, target: str) -> None:
    _link(project, rel, host / target)
    _refused(project, f"Error: {rel} leads to {host / target}, outside the project: a project reads files inside "
                      "its own folder only (copy the file into the project)")


def test_a_link_to_a_link_is_followed_to_its_end(project: Path, host: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "hop.csv").symlink_to(host / "secret.csv")  # inside the project, but leads out
    _link(project, "seeds/seed_data.csv", Path("../data/hop.csv"))
    _refused(project, f"seeds/seed_data.csv leads to {host / 'secret.csv'}, outside the project")


@pytest.mark.parametrize("written", ["../../host/secret.csv", "ABSOLUTE"])
def test_a_seed_path_leading_outside_the_project_is_refused_at_its_kind(project: Path, host: Path,
                                                                         written: str) -> None:
    path = str(host / "secret.csv") if written == "ABSOLUTE" else written
    seed = project / SEED_MODEL
    text = seed.read_text()
    assert "'../seeds/seed_data.csv'" in text
    seed.write_text(text.replace("'../seeds/seed_data.csv'", f"'{path}'"))
    kind_line = next(n for n, line in enumerate(text.splitlines(), 1) if "kind" in line)
    _refused(project, f"{SEED_MODEL}:{kind_line}: The seed file of sqlmesh_example.seed_model leads to "
                      f"{host / 'secret.csv'}, outside the project")


def test_links_inside_the_project_keep_working(project: Path) -> None:
    """A seed kept elsewhere in the project, and a models folder that is a link to one inside it."""
    (project / "data").mkdir()
    os.replace(project / "seeds" / "seed_data.csv", project / "data" / "seed_data.csv")
    (project / "seeds" / "seed_data.csv").symlink_to(Path("../data/seed_data.csv"))
    os.replace(project / "audits", project / "data" / "audits")
    (project / "audits").symlink_to(project / "data" / "audits")
    loaded = load_project(project)
    assert loaded.seeds["sqlmesh_example.seed_model"].header == ["id", "item_id", "event_date"]
    assert "assert_positive_order_ids" in loaded.audits
    assert mesh(project, "plan", "--explain").exit_code == 0


def test_a_unit_test_fixture_file_outside_the_project_is_refused(project: Path, host: Path) -> None:
    (project / "tests" / "test_fixture.yaml").write_text(textwrap.dedent(f"""\
        test_from_file:
          model: sqlmesh_example.full_model
          inputs:
            sqlmesh_example.incremental_model:
              path: {host / 'secret.csv'}
          outputs: {{query: []}}
        """))
    with pytest.raises(UnitTestError) as e:
        load_tests(load_project(project))
    assert str(e.value) == (f"tests/test_fixture.yaml:5: Test 'test_from_file': fixture file {host / 'secret.csv'} "
                            f"leads to {host / 'secret.csv'}, outside the project: a project reads files inside its "
                            "own folder only (copy the file into the project)")
