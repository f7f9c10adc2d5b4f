"""Multi-repo projects (core/project/repos.py): several folders loaded as one project, each
repository rendering its models with its own defaults, variables and macros, one plan and one
state across them; what is not supported is refused before anything is read or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import CONFIG, record_plan, write_project

from mesh_dagster.core.errors import ConfigError, ModelError, PlanError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.sql.renderer import RenderContext, render_query
from mesh_dagster.state.store import StateStore


def _macro(value: str) -> str:
    return f"from sqlmesh import macro\n\n\n@macro()\ndef dup(evaluator):\n    return \"'{value}'\"\n"


def _two_repos(tmp_path: Path, first_config: str = "", second_config: str = "",
               second_files: dict[str, str] | None = None) -> tuple[Path, Path]:
    first = write_project(tmp_path / "repo_1", {
        "models/a.sql": "MODEL (name bronze.a, kind FULL);\nSELECT 1 AS col_a, @dup() AS who, @VAR('level') AS level\n",
        "macros/__init__.py": _macro("repo_1"),
    }, CONFIG + "project: repo_1\nvariables:\n  level: 1\n" + first_config)
    second = write_project(tmp_path / "repo_2", second_files or {
        "models/c.sql": "MODEL (name silver.c, kind FULL);\nSELECT col_a, who, @dup() AS mine, @VAR('level') AS level FROM bronze.a\n",
        "macros/__init__.py": _macro("repo_2"),
    }, "project: repo_2\nvariables:\n  level: 2\nmodel_defaults:\n  dialect: spark\n  start: 2020-01-01\n  cron: '@hourly'\n"
       + second_config)
    return first, second


def _rendered(project, name: str) -> str:
    repo = project.repo_of(name)
    ctx = RenderContext(variables=repo.variables, schemas=project.parent_schemas(name))
    return render_query(project.models[name], ctx, repo.macros).sql(dialect="spark")


def test_each_repository_renders_its_models_with_its_own_macros_variables_and_defaults(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    project = load_project(first, use_cache=False, repos=[second])
    assert project.parents("silver.c") == ["bronze.a"]  # a model of one repository reads another's
    assert "'repo_1' AS who" in _rendered(project, "bronze.a") and "1 AS level" in _rendered(project, "bronze.a")
    assert "'repo_2' AS mine" in _rendered(project, "silver.c") and "2 AS level" in _rendered(project, "silver.c")
    assert (project.models["bronze.a"].cron, project.models["silver.c"].cron) == ("@daily", "@hourly")  # their own
    assert project.models["silver.c"].path == "../repo_2/models/c.sql"
    snapshots = build_snapshots(project)  # each snapshot captures its own repository's macro and variable
    captured = snapshots["silver.c"].capture
    assert captured is not None and captured.variable_values() == {"level": 2}
    assert "repo_2" in captured.macros["dup"].env["dup"].text
    assert "repo_1" in snapshots["bronze.a"].capture.macros["dup"].env["dup"].text


def test_the_order_of_loading_does_not_change_the_fingerprints_of_either_repository(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    once = build_snapshots(load_project(first, use_cache=False, repos=[second]))
    again = build_snapshots(load_project(first, use_cache=True, repos=[second]))
    cached = build_snapshots(load_project(first, use_cache=True, repos=[second]))
    assert {n: s.fingerprint for n, s in once.items()} == {n: s.fingerprint for n, s in again.items()} \
        == {n: s.fingerprint for n, s in cached.items()}


def test_a_macro_changed_in_one_repository_changes_only_its_models(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    before = build_snapshots(load_project(first, use_cache=False, repos=[second]))
    (second / "macros" / "__init__.py").write_text(_macro("repo_two"))
    after = build_snapshots(load_project(first, use_cache=False, repos=[second]))
    assert before["bronze.a"].fingerprint == after["bronze.a"].fingerprint
    assert before["silver.c"].fingerprint.data_hash != after["silver.c"].fingerprint.data_hash


def test_a_python_model_of_a_later_repository_stores_its_helper_module(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path, second_files={
        "helpers/rates.py": "RATE = 3\n\n\ndef scaled(x):\n    return x * RATE\n",
        "models/py.py": """
            import pandas as pd
            from helpers.rates import scaled
            from sqlmesh import model


            @model("silver.py", columns={"v": "int"}, kind="FULL")
            def execute(context, start, end, execution_time, **kwargs):
                return pd.DataFrame({"v": [scaled(1)]})
            """,
    })
    project = load_project(first, use_cache=False, repos=[second])
    code = project.models["silver.py"].python
    assert code is not None and "RATE = 3" in "\n".join(piece.text for piece in code.env.values())
    assert {piece.path for piece in code.env.values()} - {None} == {"../repo_2/models/py.py", "../repo_2/helpers/rates.py"}


def test_a_model_defined_in_two_repositories_is_refused_naming_both_files(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path, second_files={"models/a.sql": "MODEL (name bronze.a, kind FULL);\nSELECT 2 AS col_a\n"})
    with pytest.raises(ModelError) as e:
        load_project(first, use_cache=False, repos=[second])
    assert e.value.path == "../repo_2/models/a.sql" and "also defined in models/a.sql" in e.value.message


@pytest.mark.parametrize("extra, message", [
    ("before_all:\n  - SELECT 1\n", "before_all of a repository after the first is not supported yet"),
    ("project: repo_1\n", "project: 'repo_1' names another repository of this project too"),
])
def test_what_a_later_repository_cannot_say_is_refused_at_its_line(tmp_path: Path, extra: str, message: str) -> None:
    first, second = _two_repos(tmp_path)
    text = (second / "config.yaml").read_text()
    (second / "config.yaml").write_text(text.replace("project: repo_2\n", "") if "project" in extra else text)
    (second / "config.yaml").write_text((second / "config.yaml").read_text() + extra)
    with pytest.raises(ConfigError) as e:
        load_project(first, use_cache=False, repos=[second])
    assert message in e.value.message and e.value.path == "../repo_2/config.yaml" and e.value.line


def test_signals_of_a_later_repository_are_refused(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    (second / "signals").mkdir()
    (second / "signals" / "ready.py").write_text("X = 1\n")
    with pytest.raises(ConfigError, match="signals/ of a repository after the first is not supported yet"):
        load_project(first, use_cache=False, repos=[second])


@pytest.mark.parametrize("given", ["missing", "same", "inside"])
def test_repository_folders_that_cannot_be_loaded_as_one_project_are_refused(tmp_path: Path, given: str) -> None:
    first, second = _two_repos(tmp_path)
    other = {"missing": tmp_path / "nowhere", "same": first, "inside": first / "models"}[given]
    with pytest.raises(ConfigError) as e:
        load_project(first, use_cache=False, repos=[second, other])
    assert ("not found" if given == "missing" else "given twice, or inside another repository") in e.value.message


def test_settings_of_a_later_repository_that_are_not_used_are_named_in_a_warning(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path, second_config="snapshot_ttl: in 2 weeks\n")
    project = load_project(first, use_cache=False, repos=[second])
    warning = next(w for w in project.warnings if w.startswith("../repo_2/config.yaml"))
    assert "snapshot_ttl" in warning and "gateways" not in warning


def test_a_plan_of_one_repository_never_drops_another_repositorys_models(tmp_path: Path) -> None:
    first, second = _two_repos(tmp_path)
    with StateStore(f"sqlite:///{tmp_path / 'state.db'}") as state:
        record_plan(build_plan(load_project(first, use_cache=False, repos=[second]), state, "prod",
                               execution_time="2020-01-04"), state)
        alone = load_project(first, use_cache=False)
        with pytest.raises(PlanError) as e:
            build_plan(alone, state, "prod", execution_time="2020-01-05")
        assert "prod holds silver.c of the repository 'repo_2', which this command did not load" in str(e.value)
        assert len(state.environments.get_environment("prod").snapshots) == 2  # nothing was written
        (second / "models" / "c.sql").unlink()  # removing it from its own repository is a plan like any
        plan = build_plan(load_project(first, use_cache=False, repos=[second]), state, "prod",
                          execution_time="2020-01-05")
        assert [es.name for es in plan.removed] == ["silver.c"]


def test_mesh_init_refuses_several_folders_and_creates_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mesh_dagster.cli.main import cli

    result = CliRunner().invoke(cli, ["-p", str(tmp_path / "a"), "-p", str(tmp_path / "b"), "init", "spark"])
    assert result.exit_code != 0 and "mesh init creates one project: give its folder with one -p" in result.output
    assert list(tmp_path.iterdir()) == []
