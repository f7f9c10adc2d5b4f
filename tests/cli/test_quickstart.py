"""The SQLMesh quickstart (seeds/quickstart-cli.md), step by step, through the real `mesh` CLI."""

import re

import pytest

pytestmark = pytest.mark.slow


def _section(text: str, title: str) -> str:
    """Lines of a printed tree section, up to the next unindented line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith(("├", "└", "│", " ")):
            break
        out.append(line)
    return "\n".join(out)


def test_quickstart(tmp_path, mesh):
    project = tmp_path / "sqlmesh-example"
    project.mkdir()

    # 1. init
    mesh(project, "init", "spark")
    for f in ["config.yaml", "models/seed_model.sql", "models/incremental_model.sql", "models/full_model.sql",
              "seeds/seed_data.csv", "audits/assert_positive_order_ids.sql", "tests/test_full_model.yaml"]:
        assert (project / f).is_file(), f

    # 2. first plan: prod initialised with 3 added models, backfilled after the prompt
    out = mesh(project, "plan", input="y\n").stdout
    assert "Successfully Ran 1 tests against spark" in out
    assert "`prod` environment will be initialized" in out
    added = _section(out, "└── Added:") if "└── Added:" in out else out
    for name in ["full_model", "incremental_model", "seed_model"]:
        assert f"sqlmesh_example.{name}" in added
    backfill = _section(out, "Models needing backfill:")
    assert "sqlmesh_example.full_model: [full refresh]" in backfill
    assert "sqlmesh_example.seed_model: [full refresh]" in backfill
    assert re.search(r"sqlmesh_example\.incremental_model: \[2020-01-01 - \d{4}-\d\d-\d\d\]", backfill)
    assert "Apply - Backfill Tables [y/n]:" in out
    assert "[insert seed file]" in out and "[full refresh, audits ✔1]" in out
    assert "✔ Physical layer updated" in out and "✔ Model batches executed" in out and "✔ Virtual layer updated" in out

    # 3. add a column to incremental_model
    model = project / "models" / "incremental_model.sql"
    model.write_text(model.read_text().replace("  item_id,\n", "  item_id,\n  'z' AS new_column, -- Added column\n"))

    # 4. dev plan: non-breaking + indirect non-breaking, only incremental_model backfilled
    out = mesh(project, "plan", "dev", input="y\n").stdout
    assert "New environment `dev` will be created from `prod`" in out
    assert "Directly Modified:" in out and "sqlmesh_example__dev.incremental_model" in out
    assert "Indirectly Modified:" in out
    assert "+  'z' AS new_column" in out
    assert re.search(r"Directly Modified: sqlmesh_example__dev\.incremental_model \(Non-breaking\)", out)
    assert "sqlmesh_example__dev.full_model (Indirect Non-breaking)" in out
    backfill = _section(out, "Models needing backfill:")
    assert "sqlmesh_example__dev.incremental_model" in backfill and "full_model" not in backfill
    assert "Apply - Backfill Tables [y/n]:" in out
    batches = [line for line in out.splitlines() if line.startswith("[1/1]")]
    assert len(batches) == 1 and "incremental_model" in batches[0]

    # 4.2 dev has the new column, prod does not
    dev = mesh(project, "fetchdf", "select * from sqlmesh_example__dev.incremental_model order by id").stdout
    assert "new_column" in dev and dev.count(" z ") == 7
    prod = mesh(project, "fetchdf", "select * from sqlmesh_example.incremental_model").stdout
    assert "new_column" not in prod and "2020-01-07" in prod

    # 5. prod plan: a virtual update only
    out = mesh(project, "plan", input="y\n").stdout
    assert "Apply - Virtual Update [y/n]:" in out
    assert "Models needing backfill" not in out
    assert "SKIP: No physical layer updates to perform" in out
    assert "SKIP: No model batches to execute" in out
    assert "sqlmesh_example.full_model (Indirect Non-breaking)" in out
    assert "✔ Virtual layer updated" in out

    # 5.2 prod now shows the column
    prod = mesh(project, "fetchdf", "select * from sqlmesh_example.incremental_model order by id").stdout
    assert "new_column" in prod and prod.count(" z ") == 7
