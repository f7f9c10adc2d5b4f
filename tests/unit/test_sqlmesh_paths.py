"""Paths a SQLMesh project writes as SQLMesh reads them (issue 37): a seed's `$root/...` is relative
to the project's folder, and `external_models/` is read with its sub-folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.project.project import load_project

SEED = "MODEL (\n  name s.seed,\n  kind SEED (path '{path}'),\n  columns (id INT)\n);\n"


@pytest.mark.parametrize("path", ["$root/seeds/s.csv", "$ROOT/seeds/s.csv", "../../seeds/s.csv"])
def test_a_seed_path_from_root_is_the_project_folders(tmp_path: Path, path: str) -> None:
    root = write_project(tmp_path / "p", {"models/deep/seed.sql": SEED.format(path=path), "seeds/s.csv": "id\n1\n"})
    project = load_project(root, use_cache=False)
    kind = project.models["s.seed"].kind.seed
    assert kind is not None and kind.path == str(root.resolve() / "seeds" / "s.csv")
    assert project.seeds["s.seed"].header == ["id"]


def test_a_seed_path_from_root_that_leaves_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.csv").write_text("id\n1\n")
    root = write_project(tmp_path / "p", {"models/seed.sql": SEED.format(path="$root/../outside.csv")})
    with pytest.raises(ModelError, match=r"^models/seed\.sql:3: The seed file of s\.seed") as e:
        load_project(root, use_cache=False)
    assert "outside.csv" in str(e.value)


def test_a_missing_seed_from_root_is_named_as_the_project_holds_it(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"models/seed.sql": SEED.format(path="$root/seeds/none.csv")})
    with pytest.raises(ModelError, match=r"^models/seed\.sql:3: Seed file not found: seeds/none\.csv$"):
        load_project(root, use_cache=False)


def test_external_models_in_sub_folders_are_read(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {
        "external_models/raw.yaml": "- name: raw.a\n  columns:\n    id: INT\n",
        "external_models/sales/eu/orders.yaml": "- name: raw.orders\n  columns:\n    id: INT\n    amount: DOUBLE\n",
        "external_models/sales/us.yml": "- name: raw.us\n  columns:\n    id: INT\n",
        "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT o.id, o.amount FROM raw.orders AS o JOIN raw.us AS u "
                        "ON o.id = u.id JOIN raw.a AS a ON a.id = o.id\n",
    })
    project = load_project(root, use_cache=False)
    assert {"raw.a", "raw.orders", "raw.us"} <= set(project.models)
    assert project.models["raw.orders"].path == "external_models/sales/eu/orders.yaml"
    assert project.output("s.m").columns == {"id": "INT", "amount": "DOUBLE"}


def test_a_bad_external_model_in_a_sub_folder_is_named_by_its_file(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"external_models/sales/bad.yaml": "name: raw.orders\n"})
    with pytest.raises(ModelError, match=r"^external_models/sales/bad\.yaml:1: .*must be a list"):
        load_project(root, use_cache=False)


def test_metrics_are_refused_at_the_first_definition(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {
        "metrics/b.sql": "METRIC (name b, expression SUM(x.a));\n",
        "metrics/a/first.sql": "-- ours\nmetric(\n  name a,\n  expression COUNT(x.a)\n);\n",
    })
    with pytest.raises(ModelError, match=r"^metrics/a/first\.sql:2: SQLMesh metrics are not supported by mesh_dagster: "
                                         r"metrics/a/first\.sql defines one \(and 1 more file\(s\) in metrics/\)\. Move"):
        load_project(root, use_cache=False)


def test_a_metrics_folder_without_sql_files_is_no_project_of_metrics(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"metrics/README.md": "Metrics live in the BI tool.\n",
                                          "models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT 1 AS a\n"})
    assert list(load_project(root, use_cache=False).models) == ["s.m"]


@pytest.mark.parametrize("rel, text, line", [
    ("models/m.sql", "MODEL (\n  name s.m,\n  kind FULL,\n  grain (a, nope)\n);\nSELECT 1 AS a\n", 4),
    ("models/m.py", "import pandas as pd\nfrom sqlmesh import model\n\n\n@model(\n    's.m',\n    columns={'a': 'int'},\n"
                    "    grain=['nope'],\n)\ndef execute(context, **kwargs):\n    return pd.DataFrame({'a': [1]})\n", 8),
])
def test_a_grain_naming_a_column_the_model_lacks_loads_with_a_warning(tmp_path: Path, rel: str, text: str,
                                                                      line: int) -> None:
    """SQLMesh accepts it (a grain is metadata); the loader says what it cannot do with it."""
    project = load_project(write_project(tmp_path / "p", {rel: text}), use_cache=False)
    assert project.models["s.m"].grain == (["a", "nope"] if rel.endswith(".sql") else ["nope"])
    assert project.warnings == [
        f"{rel}:{line}: grain names 'nope', not an output column of s.m: kept as metadata, as SQLMesh does; data "
        "diffs of s.m compare row counts only, and `mesh table_diff` needs --on"]
