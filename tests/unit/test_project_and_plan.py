"""Project loading errors and plan categorisation, against a real SQLite state store (no Spark)."""

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.config.names import normalize_environment, view_name
from mesh_dagster.core.errors import ModelError, PlanError
from mesh_dagster.core.plan.plan import build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C

SEED = """
MODEL (
  name s.seed,
  kind SEED (path '../seeds/seed.csv'),
  columns (id INT, item_id INT, event_date DATE),
  grain (id, event_date)
);
"""
INC = """
MODEL (
  name s.inc,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_date),
  start '2020-01-01',
  grain (id, event_date)
);

SELECT id, item_id, event_date
FROM s.seed
WHERE event_date BETWEEN @start_date AND @end_date
"""
FULL = """
MODEL (name s.full, kind FULL, grain item_id);

SELECT item_id, COUNT(DISTINCT id) AS num_orders FROM s.inc GROUP BY item_id
"""
STAR = """
MODEL (name s.star, kind VIEW);

SELECT * FROM s.inc
"""
CSV = "id,item_id,event_date\n1,2,2020-01-01\n2,1,2020-01-02\n"


def base_files():
    return {"models/seed.sql": SEED, "models/inc.sql": INC, "models/full.sql": FULL, "models/star.sql": STAR,
            "seeds/seed.csv": CSV}


def test_load_project_infers_dependencies(tmp_path):
    project = load_project(write_project(tmp_path / "p", base_files()))
    assert project.parents("s.full") == ["s.inc"]
    assert project.parents("s.inc") == ["s.seed"]
    assert project.columns("s.star") == {"id": "INT", "item_id": "INT", "event_date": "DATE"}


def test_first_plan_adds_everything(tmp_path, state):
    project = load_project(write_project(tmp_path / "p", base_files()))
    plan = build_plan(project, state, execution_time="2020-01-05")
    assert sorted(plan.added) == ["s.full", "s.inc", "s.seed", "s.star"]
    assert plan.backfills["s.full"].full_refresh and plan.backfills["s.seed"].full_refresh
    assert plan.backfills["s.inc"].intervals == [(1577836800000, 1578182400000)]  # 2020-01-01 .. 2020-01-05


def _change(tmp_path, state, name, old, new, env="dev"):
    root = write_project(tmp_path / "p", base_files())
    record_plan(build_plan(load_project(root), state, execution_time="2020-01-05"), state)
    path = root / "models" / name
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    return build_plan(load_project(root), state, env, execution_time="2020-01-05")


def test_added_column_is_non_breaking_and_star_child_is_direct(tmp_path, state):
    plan = _change(tmp_path, state, "inc.sql", "SELECT id, item_id,", "SELECT id, item_id, 'z' AS new_column,")
    assert plan.directly_modified == ["s.inc", "s.star"]
    assert plan.category("s.inc") == C.NON_BREAKING
    assert plan.category("s.star") == C.NON_BREAKING  # its expanded SELECT * gained the column
    assert plan.category("s.full") == C.INDIRECT_NON_BREAKING
    assert plan.indirectly_modified == {"s.inc": ["s.full"]}
    assert set(plan.backfills) == {"s.inc", "s.star"}
    assert plan.snapshots["s.full"].version == plan.previous["s.full"].version  # reuses prod's table
    assert plan.snapshots["s.inc"].version != plan.previous["s.inc"].version
    assert "+SELECT id, item_id, 'z' AS new_column, event_date" in plan.diffs["s.inc"]
    assert sorted(plan.promoted) == ["s.full", "s.inc", "s.star"]  # not the unchanged seed


def test_where_change_is_breaking_and_backfills_children(tmp_path, state):
    plan = _change(tmp_path, state, "inc.sql", "WHERE event_date", "WHERE item_id > 1 AND event_date")
    assert plan.category("s.inc") == C.BREAKING
    assert plan.category("s.full") == C.INDIRECT_BREAKING
    assert set(plan.backfills) == {"s.inc", "s.full", "s.star"}
    assert plan.snapshots["s.full"].version != plan.previous["s.full"].version


def test_formatting_change_is_metadata_only(tmp_path, state):
    plan = _change(tmp_path, state, "full.sql", "COUNT(DISTINCT id) AS num_orders",
                   "count(DISTINCT id)   AS num_orders /* same */")
    assert plan.metadata_updated == ["s.full"] and plan.category("s.full") == C.METADATA
    assert plan.backfills == {} and plan.directly_modified == []
    assert plan.snapshots["s.full"].version == plan.previous["s.full"].version


def test_join_keys_are_metadata(tmp_path, state):
    """SQLMesh's `references` and grain aliases say how other models join this one: metadata."""
    plan = _change(tmp_path, state, "full.sql", "grain item_id", "grains (item_id AS item), references (item_id)")
    assert plan.metadata_updated == ["s.full"] and plan.category("s.full") == C.METADATA
    assert plan.backfills == {} and plan.snapshots["s.full"].version == plan.previous["s.full"].version


def test_requalified_query_is_metadata_only(tmp_path, state):
    plan = _change(tmp_path, state, "full.sql", "SELECT item_id, COUNT(DISTINCT id)",
                   "SELECT inc.item_id AS item_id, COUNT(DISTINCT inc.id)")
    assert plan.metadata_updated == ["s.full"] and plan.category("s.full") == C.METADATA
    assert plan.backfills == {} and plan.snapshots["s.full"].version == plan.previous["s.full"].version


@pytest.mark.parametrize("stored, category", [
    # What an older renderer may have stored: quoted, aliased, an ordinal. Same query.
    ("SELECT `item_id` AS item_id, COUNT(DISTINCT `id`) AS num_orders FROM s.inc GROUP BY 1", C.METADATA),
    ("SELECT item_id, COUNT(DISTINCT id) AS num_orders FROM s.inc WHERE (", C.BREAKING),  # unreadable now
])
def test_snapshot_stored_with_another_rendering(tmp_path, state, stored, category):
    """Snapshots keep the rendering of the version that stored them; both sides are canonicalized
    when compared, so a rewrite that changes nothing is still metadata-only against old state,
    and a stored text that cannot be read any more is breaking, not a crash."""
    root = write_project(tmp_path / "p", base_files())
    record_plan(build_plan(load_project(root), state, execution_time="2020-01-05"), state)
    full = state.environments.get_environment("prod").snapshot_by_name()["s.full"]
    snapshot = state.snapshots.get_snapshots([full.snapshot_id])[full.snapshot_id]
    state.snapshots.update_snapshots([snapshot.model_copy(update={"rendered_query": stored})])

    path = root / "models" / "full.sql"
    path.write_text(path.read_text().replace("SELECT item_id,", "SELECT inc.item_id AS item_id,"))
    plan = build_plan(load_project(root), state, "dev", execution_time="2020-01-05")
    assert plan.category("s.full") == category
    reused = plan.snapshots["s.full"].version == plan.previous["s.full"].version
    assert reused == (category == C.METADATA) and reused == ("s.full" not in plan.backfills)


def test_prod_after_dev_reuses_everything(tmp_path, state):
    plan = _change(tmp_path, state, "inc.sql", "SELECT id, item_id,", "SELECT id, item_id, 'z' AS new_column,")
    record_plan(plan, state)
    prod = build_plan(load_project(tmp_path / "p"), state, execution_time="2020-01-05")
    assert prod.new_snapshots == [] and prod.backfills == {}
    assert prod.directly_modified == ["s.inc", "s.star"] and prod.category("s.inc") == C.NON_BREAKING


def test_no_change_new_dev_environment_is_refused(tmp_path, state):
    root = write_project(tmp_path / "p", base_files())
    record_plan(build_plan(load_project(root), state, execution_time="2020-01-05"), state)
    with pytest.raises(PlanError, match="requires a change"):
        build_plan(load_project(root), state, "dev", execution_time="2020-01-05")
    plan = build_plan(load_project(root), state, "dev", include_unmodified=True, execution_time="2020-01-05")
    assert sorted(plan.promoted) == ["s.full", "s.inc", "s.seed", "s.star"] and plan.backfills == {}


def test_prod_plan_rejects_start_end(tmp_path, state):
    project = load_project(write_project(tmp_path / "p", base_files()))
    with pytest.raises(PlanError, match="only be set for development"):
        build_plan(project, state, start="2020-01-01")


def test_environment_names_are_normalised():
    assert normalize_environment("Feature/ABC-1; DROP") == "feature_abc_1__drop"
    assert view_name("s.m", "My-Dev") == "s__my_dev.m"


@pytest.mark.parametrize(
    "files, message, where",
    [
        ({"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT * FROM s.b",
          "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT * FROM s.a"}, "cycle", ("models/a.sql", 1)),
        ({"models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS x",
          "models/b.sql": "MODEL (name s.a, kind FULL);\nSELECT 2 AS x"}, "Duplicate model name 's.a'", ("models/b.sql", 1)),
        ({"models/a.sql": "MODEL (name s.a, kind FULL);\n\nSELECT x FROM y WHERE"}, "Cannot parse", ("models/a.sql", 3)),
        ({"models/seed.sql": SEED, "seeds/seed.csv": "id,item,event_date\n1,2,2020-01-01\n"},
         "header does not match", ("seeds/seed.csv", 1)),
        ({"models/a.sql": "MODEL (name s.a, kind FULL, audits (nope));\nSELECT 1 AS x"}, "unknown audit 'nope'",
         ("models/a.sql", 1)),
    ],
)
def test_bad_projects(tmp_path, files, message, where):
    root = write_project(tmp_path / "p", files)
    with pytest.raises(ModelError) as e:
        load_project(root)
    assert message in e.value.message
    path, line = where
    assert e.value.path.endswith(path) and e.value.line == line
    assert not (root / ".mesh").exists()  # nothing written


def test_external_model_satisfies_reference(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT * FROM raw.events",
        "external_models.yaml": "- name: raw.events\n  columns:\n    id: int\n    ts: timestamp\n",
    })
    project = load_project(root)
    assert project.parents("s.a") == ["raw.events"]
    assert project.columns("s.a") == {"id": "INT", "ts": "TIMESTAMP"}
