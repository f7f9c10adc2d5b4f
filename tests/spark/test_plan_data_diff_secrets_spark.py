"""A data diff never shows the values of secret or personal columns, on real Spark: a model with
`email` (its grain), `password`, `ssn`, `api_token` and `tax_ref` columns (the last masked by
`plan.data_diff.masked_columns`) changed in dev keeps its counts and which columns changed, while
every one of those values is `***` in the stored record, `mesh plans show`, the review summary,
Dagster's metadata, the prod plan that reuses the diff and every webhook body; a model
`plan.data_diff.no_samples` selects keeps no rows at all. Issue 34, point 7."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from bad_input.harness import mesh
from project_builder import CONFIG, write_project

from mesh_dagster.context import Context
from mesh_dagster.dagster.jobs.reviews import data_diff_metadata
from tests.bad_input.test_secrets import Hook

WHEN = "2020-01-03"
SECRET = "SEKRET"  # in every value of a masked column, never in what mesh shows
PEOPLE = "id,email,password,ssn,api_token,tax_ref,v\n" + "".join(
    f"{i},user{i}@{SECRET}.example,pw-{SECRET}-{i},ssn-{SECRET}-{i},tok-{SECRET}-{i},tax-{SECRET}-{i},{i * 10}\n"
    for i in range(1, 7))
# dev: every column of rows 1-3 changes, row 6 goes, a row comes
CHANGED = ("SELECT email, CASE WHEN id <= 3 THEN concat(password, '!') ELSE password END AS password, "
           "CASE WHEN id <= 3 THEN concat(ssn, '!') ELSE ssn END AS ssn, "
           "CASE WHEN id <= 3 THEN concat(api_token, '!') ELSE api_token END AS api_token, "
           "CASE WHEN id <= 3 THEN concat(tax_ref, '!') ELSE tax_ref END AS tax_ref, "
           "CASE WHEN id <= 3 THEN v + 1 ELSE v END AS v FROM {s}.people_seed WHERE id <> 6 "
           "UNION ALL SELECT concat('new-', email), concat(password, '?'), concat(ssn, '?'), concat(api_token, '?'), "
           "concat(tax_ref, '?'), 70 FROM {s}.people_seed WHERE id = 1")


def _project(tmp_path: Path, schema: str, port: int) -> Path:
    config = (CONFIG + "plan:\n  data_diff:\n    masked_columns: [tax_ref]\n    no_samples: ['tag:payroll']\n"
              f"notification_targets:\n  - url: http://127.0.0.1:{port}/hook\n")
    columns = "columns (id INT, email STRING, password STRING, ssn STRING, api_token STRING, tax_ref STRING, v INT)"
    return write_project(tmp_path / "p", {
        "seeds/people.csv": PEOPLE,
        "models/people_seed.sql": f"MODEL (name {schema}.people_seed, kind SEED (path '../seeds/people.csv'), "
                                  f"{columns}, grain (id));\n",
        "models/people.sql": f"MODEL (name {schema}.people, kind FULL, grain (email));\n"
                             f"SELECT email, password, ssn, api_token, tax_ref, v FROM {schema}.people_seed\n",
        "models/payroll.sql": f"MODEL (name {schema}.payroll, kind FULL, grain (id), tags [payroll]);\n"
                              f"SELECT id, v FROM {schema}.people_seed\n",
    }, config)


def _change(root: Path, schema: str) -> None:
    (root / "models" / "people.sql").write_text(f"MODEL (name {schema}.people, kind FULL, grain (email));\n"
                                                + CHANGED.format(s=schema) + "\n")
    (root / "models" / "payroll.sql").write_text(
        f"MODEL (name {schema}.payroll, kind FULL, grain (id), tags [payroll]);\n"
        f"SELECT id, v + 1 AS v FROM {schema}.people_seed\n")


def test_secret_and_personal_values_are_masked_everywhere_a_diff_goes(tmp_path, engine, unique_schema, monkeypatch):
    schema = unique_schema
    people, payroll = f"{schema}.people", f"{schema}.payroll"
    hook = Hook()
    try:
        monkeypatch.setenv("MESH_USER", "alice@example.com")
        root = _project(tmp_path, schema, hook.port)
        base = Context(root, engine=engine)
        base.reviews.apply(base.plans.plan(execution_time=WHEN))
        base.close()
        (root / "config.yaml").write_text((root / "config.yaml").read_text()
                                          + "protected_environments:\n  prod:\n    approvers: [bob@example.com]\n")
        _change(root, schema)
        ctx = Context(root, engine=engine)
        dev = ctx.plans.plan("dev", execution_time=WHEN)
        ctx.reviews.apply(dev)
        record = ctx.reviews.records.find(dev.plan_id)
        prod = ctx.plans.plan("prod", execution_time=WHEN)
        prod_record = ctx.reviews.record(prod)  # reuses dev's diff; its reviewers are notified
        ctx.close()
    finally:
        hook.close()

    d = record.summary.data_diffs[people]
    # the counts and which columns changed stay
    assert (d.status, d.grain, d.old_rows, d.new_rows) == ("compared", ["email"], 6, 6)
    assert (d.only_new, d.only_old, d.changed, d.unchanged) == (1, 1, 3, 2)
    assert d.column_changes == {"password": 3, "ssn": 3, "api_token": 3, "tax_ref": 3, "v": 3}
    # the values do not: keys (email) included; `v` is no secret and is shown
    assert d.masked_columns == ["email", "password", "ssn", "api_token", "tax_ref"]
    assert d.sample_columns[:3] == ["email", "new password", "old password"] and len(d.sample) == 5
    assert {row[0] for row in d.sample} == {"***"}
    assert sorted(tuple(row[-2:]) for row in d.sample) == [
        ("11", "10"), ("21", "20"), ("31", "30"), ("70", "NULL"), ("NULL", "60")]
    assert "values of email, password, ssn, api_token, tax_ref masked" in d.note_text()
    # no_samples: the counts, no rows
    p = record.summary.data_diffs[payroll]
    assert (p.changed, p.column_changes, p.sample, p.sample_columns) == (6, {"v": 6}, [], [])
    assert "no sample rows (plan.data_diff.no_samples" in p.note_text()

    shown = mesh(root, "plans", "show", dev.plan_id)
    assert shown.exit_code == 0, shown.stderr
    assert "***" in shown.stdout and "values of email, password, ssn, api_token, tax_ref masked" in \
        " ".join(shown.stdout.split())
    reused = prod_record.summary.data_diffs[people]
    assert reused.source_plan_id == dev.plan_id and reused.sample == d.sample  # masked as this project masks
    metadata = data_diff_metadata(record)
    with closing(sqlite3.connect(root / ".mesh" / "state.db")) as db:
        payloads = [row[0] for row in db.execute("SELECT payload FROM mesh_plans")]
    outputs = {
        "plans show": shown.stdout + shown.stderr,
        "summary": record.summary.markdown("dev"),
        "prod review": prod_record.summary.markdown("prod"),
        "dagster metadata": str(metadata["data_diff"].value.records) + metadata["data_diff_details"].value,
        "stored payloads": "\n".join(payloads),
        "webhooks": str([body for _, body in hook.received]),
    }
    assert not [where for where, text in outputs.items() if SECRET in text], outputs
    assert "| `***` | `***` | `***` |" in outputs["summary"] and "`tax_ref` changed in 3 rows" in outputs["summary"]
    events = sorted(body["event"] for _, body in hook.received)
    assert events == ["plan_applied", "plan_applied", "plan_pending"], events
