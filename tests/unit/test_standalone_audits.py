"""Standalone audits and external model audits, as loaded and planned (no Spark).

SQLMesh's documented behaviour is the expectation: a standalone audit (`standalone true`) is a
node of its own reading the models its query names (and `depends_on`), shown in plans as added,
edited (a metadata change) or removed; it is never blocking (`blocking true` is refused).
External models accept `audits` (a list of `- name: audit` with arguments as SQL text) and `start`.
"""

from __future__ import annotations

import re

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.context import Context
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.project.standalone_audits import NODE_PROPERTIES
from mesh_dagster.core.snapshots.snapshot import ChangeCategory

MODEL = """
MODEL (name s.items, kind FULL);
SELECT 1 AS id, 2.0 AS price
"""

AUDIT = """
AUDIT (
  name assert_price_positive,
  standalone true,
  owner alice,
  start '2024-01-01'
);
SELECT * FROM s.items WHERE price <= 0
"""


def _project(tmp_path, audit: str = AUDIT, extra: dict[str, str] | None = None):
    return write_project(tmp_path / "p", {"models/items.sql": MODEL, "audits/standalone.sql": audit, **(extra or {})})


def test_a_standalone_audit_is_a_node_reading_the_models_its_query_names(tmp_path) -> None:
    project = load_project(_project(tmp_path), use_cache=False)
    node = project.models["assert_price_positive"]
    assert node.kind.is_standalone_audit and node.is_scheduled
    assert project.parents("assert_price_positive") == ["s.items"]
    assert (node.owner, node.start, node.cron) == ("alice", "2024-01-01", "@daily")
    assert not project.audits["assert_price_positive"].blocking


def test_depends_on_adds_parents_the_query_does_not_name(tmp_path) -> None:
    audit = AUDIT.replace("start '2024-01-01'", "depends_on (s.other)")
    other = "MODEL (name s.other, kind FULL);\nSELECT 1 AS x\n"
    project = load_project(_project(tmp_path, audit, {"models/other.sql": other}), use_cache=False)
    assert sorted(project.parents("assert_price_positive")) == ["s.items", "s.other"]


def test_a_blocking_standalone_audit_is_refused_at_its_line(tmp_path) -> None:
    audit = AUDIT.replace("standalone true,", "standalone true,\n  blocking true,")
    with pytest.raises(ModelError, match="Standalone audits cannot be blocking: 'assert_price_positive'") as e:
        load_project(_project(tmp_path, audit), use_cache=False)
    assert (e.value.path, e.value.line) == ("audits/standalone.sql", 4)


def test_node_properties_are_refused_on_an_audit_attached_to_models(tmp_path) -> None:
    audit = "AUDIT (name a, cron '@hourly');\nSELECT * FROM @this_model WHERE FALSE\n"
    with pytest.raises(ModelError, match="'cron' is only for standalone audits") as e:
        load_project(_project(tmp_path, audit), use_cache=False)
    assert (e.value.path, e.value.line) == ("audits/standalone.sql", 1)


def test_a_standalone_audit_written_as_a_model_kind_is_refused(tmp_path) -> None:
    model = "MODEL (name s.x, kind STANDALONE_AUDIT);\nSELECT 1 AS a\n"
    with pytest.raises(ModelError, match="Standalone audits are written in audits/"):
        load_project(_project(tmp_path, extra={"models/x.sql": model}), use_cache=False)


def test_plans_show_a_standalone_audit_added_edited_and_removed(tmp_path) -> None:
    root = _project(tmp_path)
    ctx = Context(root)
    try:
        first = ctx.plans.plan(execution_time="2024-01-03")
        assert "assert_price_positive" in first.added
        assert first.backfills["assert_price_positive"].intervals  # it runs for its intervals
        assert "assert_price_positive" not in first.promoted  # no view
        record_plan(first, ctx.state)
    finally:
        ctx.close()

    (root / "audits/standalone.sql").write_text(AUDIT.replace("price <= 0", "price < 0"))
    ctx = Context(root)
    try:
        edited = ctx.plans.plan(execution_time="2024-01-03")
        assert edited.metadata_updated == ["assert_price_positive"]
        assert edited.category("assert_price_positive") == ChangeCategory.METADATA
        assert "price < 0" in edited.diffs["assert_price_positive"]
        assert not edited.backfills  # same intervals: it keeps its verdicts, as in SQLMesh
    finally:
        ctx.close()

    (root / "audits/standalone.sql").unlink()
    ctx = Context(root)
    try:
        removed = ctx.plans.plan(execution_time="2024-01-03")
        assert [r.name for r in removed.removed] == ["assert_price_positive"]
        assert removed.view("assert_price_positive") == "assert_price_positive"  # it never had a view
    finally:
        ctx.close()


def test_a_breaking_change_of_a_parent_runs_the_standalone_audit_again(tmp_path) -> None:
    root = _project(tmp_path)
    ctx = Context(root)
    try:
        record_plan(ctx.plans.plan(execution_time="2024-01-03"), ctx.state)
    finally:
        ctx.close()
    (root / "models/items.sql").write_text(MODEL.replace("2.0 AS price", "3.0 AS price"))
    ctx = Context(root)
    try:
        plan = ctx.plans.plan(execution_time="2024-01-03")
        assert plan.category("assert_price_positive") == ChangeCategory.INDIRECT_BREAKING
        assert "assert_price_positive" in plan.backfills
    finally:
        ctx.close()


EXTERNAL = """
- name: raw.demographics
  start: '2024-01-01'
  audits:
    - name: not_null
      columns: "[customer_id]"
    - name: accepted_values_non_blocking
      column: zip
      is_in: "('1', '2')"
  columns:
    customer_id: int
    zip: string
"""


def test_external_models_take_audits_and_a_start(tmp_path) -> None:
    reader = "MODEL (name s.customers, kind FULL);\nSELECT customer_id FROM raw.demographics\n"
    project = load_project(write_project(tmp_path / "p", {"models/c.sql": reader, "external_models.yaml": EXTERNAL}),
                           use_cache=False)
    ext = project.models["raw.demographics"]
    assert ext.start == "2024-01-01" and ext.is_scheduled
    assert [(a.name, a.args) for a in ext.audits] == [
        ("not_null", {"columns": "[customer_id]"}), ("accepted_values_non_blocking", {"column": "zip", "is_in": "('1', '2')"})]


def test_an_external_model_audit_with_an_unknown_argument_is_refused_at_its_line(tmp_path) -> None:
    text = EXTERNAL.replace("columns: \"[customer_id]\"", "colums: \"[customer_id]\"")
    with pytest.raises(ModelError, match="Audit 'not_null' has no argument 'colums'") as e:
        load_project(write_project(tmp_path / "p", {"external_models.yaml": text}), use_cache=False)
    assert (e.value.path, e.value.line) == ("external_models.yaml", 3)


def test_an_external_model_without_audits_stays_unscheduled(tmp_path) -> None:
    text = "- name: raw.t\n  columns:\n    a: int\n"
    project = load_project(write_project(tmp_path / "p", {"external_models.yaml": text}), use_cache=False)
    assert not project.models["raw.t"].is_scheduled


def test_a_model_attaching_a_standalone_audit_is_refused(tmp_path) -> None:
    model = MODEL.replace("kind FULL", "kind FULL, audits (assert_price_positive)")
    with pytest.raises(ModelError, match="attaches 'assert_price_positive', a standalone audit") as e:
        load_project(_project(tmp_path, extra={"models/items.sql": model}), use_cache=False)
    assert e.value.path == "models/items.sql"


NODE_PROBES = [
    ("depends_on (s.items)", "depends_on", ["s.items"]),
    ("cron '@hourly'", "cron", "@hourly"),
    ("cron_tz 'Europe/Paris'", "cron_tz", "Europe/Paris"),
    ("interval_unit hour", "declared_unit", "hour"),
    ("start '2024-01-01'", "start", "2024-01-01"),
    ("start '2024-01-01', end '2024-02-01'", "end", "2024-02-01"),
    ("owner alice", "owner", "alice"),
    ("tags (a, b)", "tags", ["a", "b"]),
    ("stamp v2", "stamp", "v2"),
]


def test_every_node_property_has_a_probe() -> None:
    written = {key for text, _, _ in NODE_PROBES for key in re.findall(r"(?:^|, )([a-z_]+) ", text)}
    assert written == set(NODE_PROPERTIES)


@pytest.mark.parametrize(("written", "field", "value"), NODE_PROBES)
def test_every_node_property_is_the_nodes(tmp_path, written: str, field: str, value) -> None:
    audit = f"AUDIT (name n, standalone true, {written});\nSELECT * FROM s.items WHERE price <= 0\n"
    node = load_project(_project(tmp_path, audit), use_cache=False).models["n"]
    found = getattr(node, field)
    assert (found.value if hasattr(found, "value") else found) == value



def test_an_interval_unit_longer_than_the_cron_is_refused_at_its_line(tmp_path) -> None:
    audit = "AUDIT (\n  name n,\n  standalone true,\n  interval_unit month\n);\nSELECT * FROM s.items\n"
    with pytest.raises(ModelError) as e:
        load_project(_project(tmp_path, audit), use_cache=False)
    assert (e.value.path, e.value.line) == ("audits/standalone.sql", 4)


def test_a_plan_record_observes_no_asset_for_a_standalone_audit(tmp_path) -> None:
    """Dagster's plan status sensor observes the assets a plan touches: a standalone audit has none."""
    from mesh_dagster.core.plan.review import PlanRecord, summarize
    from mesh_dagster.dagster.jobs.reviews import observations

    ctx = Context(_project(tmp_path))
    try:
        plan = ctx.plans.plan(execution_time="2024-01-03")
    finally:
        ctx.close()
    summary = summarize(plan)
    assert summary.standalone_audits == ["assert_price_positive"]
    record = PlanRecord(plan_id=plan.plan_id, environment="prod", author="a", created_ts=1, updated_ts=1,
                        summary=summary)
    assert [o.asset_key.path for o in observations(record, "prod", "pending", {})] == [["s", "items"]]
