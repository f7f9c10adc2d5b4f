"""`mesh lineage MODEL [COLUMN]`: the upstream columns of a model's columns as a tree, down to the
seed; errors name an unknown model or column (no Spark)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import run_mesh

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("lineage") / "example_project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    return dest


def test_every_column_as_a_tree_down_to_the_seed(example):
    out = run_mesh(example, "lineage", "sqlmesh_example.full_model").stdout
    assert out.splitlines() == [
        "sqlmesh_example.full_model",
        "├── item_id",
        "│   └── sqlmesh_example.incremental_model.item_id",
        "│       └── sqlmesh_example.seed_model.item_id",
        "└── num_orders",
        "    └── sqlmesh_example.incremental_model.id",
        "        └── sqlmesh_example.seed_model.id",
    ]


def test_one_column_a_view_name_and_a_depth(example):
    out = run_mesh(example, "lineage", "sqlmesh_example__dev.full_model", "NUM_ORDERS", "--depth", "1").stdout
    assert out.splitlines() == [
        "sqlmesh_example.full_model",
        "└── num_orders",
        "    └── sqlmesh_example.incremental_model.id",
    ]


def test_unknown_column_and_model_are_named(example):
    proc = run_mesh(example, "lineage", "sqlmesh_example.full_model", "revenue", check=False)
    assert proc.returncode == 1
    assert "models/full_model.sql:1: Model sqlmesh_example.full_model has no column 'revenue' " \
           "(its columns: item_id, num_orders)" in proc.stderr + proc.stdout
    proc = run_mesh(example, "lineage", "sqlmesh_example.nope", check=False)
    assert proc.returncode == 1
    assert "Unknown model 'sqlmesh_example.nope'" in proc.stderr + proc.stdout


def test_help_says_what_it_shows(example):
    out = run_mesh(example, "lineage", "--help").stdout
    assert "MODEL [COLUMN]" in out and "upstream columns" in out and "--depth" in out


def test_a_python_models_undeclared_column_is_marked_not_known(tmp_path):
    root = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".mesh", "__pycache__"))
    (root / "models" / "py.py").write_text(
        "import pandas as pd\nfrom mesh_dagster import model\n\n\n"
        "@model('sqlmesh_example.py', columns={'item_id': 'int', 'score': 'double'},\n"
        "       depends_on=['sqlmesh_example.full_model'])\n"
        "def execute(context, start, end, execution_time):\n"
        "    return pd.DataFrame({'item_id': [1], 'score': [1.0]})\n")
    out = run_mesh(root, "lineage", "sqlmesh_example.py", "--depth", "1").stdout
    assert out.splitlines() == [
        "sqlmesh_example.py",
        "├── item_id",
        "│   └── sqlmesh_example.full_model.item_id",
        "└── score  (upstream not known)",
    ]
