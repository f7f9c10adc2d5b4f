"""`mesh create_external_models` on a project whose models read real tables of its own Spark
warehouse: one declared (its description kept), one only read (an implicit external model), one
the catalog does not have."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import yaml
from bad_input.harness import assert_refused, nothing_written
from bad_input.harness import mesh as mesh_in_process
from project_builder import write_project

DECLARED = "- name: raw.customers\n  description: CRM export, loaded nightly\n"
SETUP = """
import sys
from mesh_dagster.context import Context

context = Context(sys.argv[1])
for sql in (
    "CREATE SCHEMA IF NOT EXISTS raw",
    "CREATE TABLE raw.customers (id INT, name STRING, tags ARRAY<STRING>) USING parquet",
    "CREATE TABLE raw.events (id INT, amount DECIMAL(10, 2), ds DATE) USING parquet PARTITIONED BY (ds)",
):
    context.engine.session.execute(sql)
"""


def test_create_external_models(tmp_path, mesh):
    root = write_project(tmp_path / "p", {
        "external_models.yaml": DECLARED,
        "models/orders.sql": """
            MODEL (name s.orders, kind FULL);

            SELECT e.id, c.name, e.amount
            FROM raw.events AS e
            JOIN raw.customers AS c ON e.id = c.id
            LEFT JOIN raw.refunds AS r ON e.id = r.id
            """,
    })
    done = subprocess.run([sys.executable, "-c", SETUP, str(root)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    # the undeclared tables are warned about, on stderr, by any command that loads the project
    explained = mesh_in_process(root, "plan", "--explain")
    assert explained.exit_code == 0, explained.stderr
    warned = [line for line in explained.stderr.splitlines() if line.startswith("Warning:")]
    assert [line.split(" reads ")[1].split(",")[0] for line in warned] == ["raw.events", "raw.refunds"]
    assert warned[0].startswith("Warning: models/orders.sql:4: s.orders reads raw.events")

    # --strict: raw.refunds is not in the catalog, so nothing is written
    strict = mesh(root, "create_external_models", "--strict", check=False)
    assert strict.returncode == 1
    assert (root / "external_models.yaml").read_text() == DECLARED
    error = [line for line in strict.stderr.splitlines() if not line.startswith("Warning:") and line.strip()]
    assert len(error) == 1 and "Tables not found in the catalog: raw.refunds" in error[0], strict.stderr

    out = mesh(root, "create_external_models")
    assert "Wrote 3 external model(s) to external_models.yaml, 2 with columns from the catalog." in out.stdout
    assert "Warning: not found in the catalog, written without columns: raw.refunds" in out.stderr
    assert yaml.safe_load((root / "external_models.yaml").read_text()) == [
        {"name": "raw.customers", "description": "CRM export, loaded nightly",
         "columns": {"id": "int", "name": "string", "tags": "array<string>"}},
        {"name": "raw.events", "columns": {"id": "int", "amount": "decimal(10,2)", "ds": "date"}},
        {"name": "raw.refunds"},
    ]

    # declared now: the project loads without warnings, with the catalog's columns
    explained = mesh_in_process(root, "plan", "--explain")
    assert explained.exit_code == 0 and "Warning" not in explained.stderr, explained.stderr

    # an external_models.yaml that is not valid YAML is refused with its line, and left alone
    (root / "external_models.yaml").write_text(textwrap.dedent("""\
        - name: raw.customers
          columns:
            id: int
          - name: raw.events
        """))
    with nothing_written(root):
        refused = mesh_in_process(root, "create_external_models")
    assert_refused(refused, "external_models.yaml:4:", "Invalid YAML")


def test_help_says_what_is_kept(tmp_path):
    out = mesh_in_process(tmp_path, "create_external_models", "--help")
    assert out.exit_code == 0
    assert "columns from Spark's catalog" in out.stdout and "--strict" in out.stdout
    assert "keep their order and their other keys" in out.stdout
