"""CLI error paths: one clear line on stderr, exit code 1, nothing written."""

import os

from bad_input.harness import copy_example
from bad_input.harness import mesh as mesh_in_process
from project_builder import write_project

from mesh_dagster.context import Context

GOOD = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"}


def test_malformed_model_names_file_and_line(tmp_path, mesh):
    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (\n  name s.a,\n  kind FULL,\n  colour 'red'\n);\nSELECT 1"})
    proc = mesh(root, "plan", "--explain", check=False)
    assert proc.returncode == 1
    assert "models/a.sql:4: Unknown model property 'colour'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [p.name for p in (root / ".mesh").iterdir()] == ["logs"]  # the log of the failure, nothing else


def test_sql_syntax_error_names_the_line(tmp_path, mesh):
    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT (a FROM t"})
    proc = mesh(root, "plan", "--explain", check=False)
    assert proc.returncode == 1 and "models/a.sql:3:" in proc.stderr and "Traceback" not in proc.stderr


def test_prod_plan_rejects_start(tmp_path, mesh):
    root = write_project(tmp_path / "p", GOOD)
    proc = mesh(root, "plan", "--start", "2020-01-01", "--explain", check=False)
    assert proc.returncode == 1 and "only be set for development environments" in proc.stderr
    assert Context(root).state.environments.get_environments() == []  # the state store may be created, but no environment is


def test_environment_name_is_normalised_never_injected(tmp_path, mesh):
    root = write_project(tmp_path / "p", GOOD)
    proc = mesh(root, "plan", "Feature/X; DROP TABLE", "--explain", "--include-unmodified")
    assert "s__feature_x__drop_table.a" in proc.stdout and "DROP TABLE" not in proc.stdout.replace("feature_x__drop_table", "")
    # accepted, so git branch names work, but never silently
    assert proc.stderr.strip() == "Warning: environment 'Feature/X; DROP TABLE' is used as 'feature_x__drop_table'"


def test_a_normalised_name_is_announced_on_every_command_that_takes_one(tmp_path):
    root = write_project(tmp_path / "p", GOOD)
    for args in (["plan", "my-env", "--explain", "--include-unmodified"], ["invalidate", "my-env"],
                 ["plan", "dev", "--create-from", "my-env", "--explain"], ["diff", "my-env"]):
        outcome = mesh_in_process(root, *args)
        assert outcome.error_lines[0] == "Warning: environment 'my-env' is used as 'my_env'", args


def test_state_commands_work_with_a_broken_model_file(tmp_path):
    # `mesh environments` failed on any unreadable model: it only needs config.yaml and the state store.
    root = copy_example(tmp_path / "p")
    (root / "models" / "broken.sql").write_bytes(b"MODEL (name s.b);\nSELECT '\xff\xfe\x00'")
    assert mesh_in_process(root, "migrate").exit_code == 0
    listed = mesh_in_process(root, "environments")
    assert listed.exit_code == 0 and listed.stderr == ""
    janitor = mesh_in_process(root, "janitor", "--ignore-ttl")
    assert janitor.exit_code == 0, janitor.stderr
    refused = mesh_in_process(root, "invalidate", "dev")
    assert refused.error_lines[0].startswith("Error: Environment 'dev' does not exist")
    assert mesh_in_process(root, "plan", "--explain").exit_code == 1  # while planning still needs the models


def test_missing_java_is_one_clear_message(tmp_path, mesh):
    root = write_project(tmp_path / "p", GOOD)
    no_java = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                              if not os.path.exists(os.path.join(p, "java")))
    saved = {k: os.environ.get(k) for k in ("PATH", "JAVA_HOME")}
    os.environ["PATH"] = no_java
    os.environ.pop("JAVA_HOME", None)
    try:
        proc = mesh(root, "fetchdf", "SELECT 1", check=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert proc.returncode == 1
    assert "Java 17 or newer is required" in proc.stderr
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr


def test_help_on_every_command(tmp_path, mesh):
    out = mesh(tmp_path, "--help").stdout
    for command in ["init", "plan", "run", "fetchdf", "render", "evaluate", "diff", "table_diff", "invalidate",
                    "janitor", "test", "audit", "info", "environments"]:
        assert command in out
        assert "Usage:" in mesh(tmp_path, command, "--help").stdout
