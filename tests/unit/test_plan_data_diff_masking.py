"""What a data diff keeps of the differing rows, without Spark: which column names are masked by
default (core/config/masking.py), a failed diff's note without the value its error quotes, a
`no_samples` selector that no longer selects anything (all rows left out, never refused after the
apply), and a diff reused by a prod plan keeping its rows only if they were masked as this project
masks now. Issue 34, point 7; the whole path on Spark: tests/spark/test_plan_data_diff_secrets_spark.py."""

from __future__ import annotations

import logging

import pytest

from mesh_dagster.core.config.diff_settings import DataDiffSettings
from mesh_dagster.core.config.masking import ColumnMask
from mesh_dagster.core.plan.data_diff import DataDiff
from mesh_dagster.core.plan.diff_samples import NO_ROWS, SampleRows
from mesh_dagster.core.plan.selectors import ModelIndex
from mesh_dagster.core.time.dates import to_ms
from mesh_dagster.execution.plans.data_diffs import plan_data_diffs, reused_data_diffs
from tests.unit.test_plan_data_diff import ScriptedEngine, dev_plan
from tests.unit.test_plan_data_diff_reuse import Records, _record

NOON = to_ms("2026-11-27 12:00:00")


@pytest.mark.parametrize("column", [
    "password", "user_password_hash", "Passwords", "passwd", "pwd", "client_secret", "api_token", "apiToken",
    "API_KEY", "apikey", "PrivateKey", "ssn", "ssn2", "social_security_number", "credit_card", "card_number",
    "cc_number", "iban", "email", "EmailAddress", "phone", "phone_numbers", "dob", "birth_date", "date_of_birth",
    "home_address", "addresses", "first_name", "tax_id",
])
def test_names_that_say_secret_or_personal_are_masked(column: str) -> None:
    assert ColumnMask.with_defaults().hides(column)


@pytest.mark.parametrize("column", [
    "id", "item_key", "sort_key", "keyword", "classname", "amount", "v", "name", "ds", "emailed", "tokenizer",
    "addressee",
])
def test_other_names_are_not(column: str) -> None:
    """`key` alone is no pattern (grains are often `*_key`); words match whole, never inside another word."""
    assert not ColumnMask.with_defaults().hides(column)


def test_masked_columns_extend_the_defaults() -> None:
    mask = DataDiffSettings(masked_columns=["tax_ref", "nationalInsurance"]).mask
    assert mask.hides("customer_tax_refs") and mask.hides("national_insurance_no") and mask.hides("password")
    assert mask.hidden(["id", "tax_ref", "email", "v"]) == ["tax_ref", "email"]


class CastFailure(ScriptedEngine):
    """Spark's cast error quotes the value it failed on (a password, here)."""

    def fetchall(self, sql: str) -> list[tuple]:
        if "FULL OUTER JOIN" in sql:
            raise RuntimeError("[CAST_INVALID_INPUT] The value 'pw-SEKRET' of the type \"STRING\" cannot be cast "
                               "to \"INT\" because it is malformed.\nat line 2")
        return super().fetchall(sql)


def test_a_failed_diff_keeps_no_value_its_error_quotes(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="mesh_dagster.execution.plans.data_diffs"):
        diffs = plan_data_diffs(dev_plan(tmp_path), CastFailure(), DataDiffSettings())
    assert (diffs["s.m"].status, diffs["s.m"].note) == (
        "failed", "[CAST_INVALID_INPUT] The value '***' of the type \"STRING\" cannot be cast to \"INT\" because it "
                  "is malformed.")
    assert "SEKRET" not in caplog.text and "The value '***'" in caplog.text


def test_a_selector_that_fails_after_the_apply_leaves_every_row_out(tmp_path) -> None:
    """The plan was made (and checked) from other files: the apply is done, nothing is refused any
    more, and no model keeps rows rather than one too many."""
    engine = ScriptedEngine()
    diffs = plan_data_diffs(dev_plan(tmp_path), engine, DataDiffSettings(no_samples=["s.gone"]))
    assert diffs["s.m"].sample == [] and diffs["s.m"].changed == 3
    assert diffs["s.m"].note == ("no sample rows: plan.data_diff.no_samples 's.gone' matches no model. "
                                 "Did you mean: s.n?")
    assert not any("LIMIT" in q for q in engine.sql)


def _computed(new: str, old: str, **values) -> DataDiff:
    return DataDiff(model="s.m", new_table=new, old_table=old, old_environment="prod", grain=["id"], old_rows=10,
                    new_rows=10, changed=1, column_changes={"v": 1, "password": 1}, computed_ts=NOON,
                    sample_columns=["id", "new v", "old v", "new password", "old password"], **values)


@pytest.mark.parametrize(("settings", "masked", "kept", "note"), [
    (DataDiffSettings(), ["password"], True, None),  # masked as this project masks: kept
    (DataDiffSettings(), None, False, "sample rows left out: they were not masked as this project masks"),
    (DataDiffSettings(masked_columns=["v"]), ["password"], False,
     "sample rows left out: they were not masked as this project masks"),
    (DataDiffSettings(no_samples=["s.m"]), ["password"], False, NO_ROWS),
    (DataDiffSettings(sample_rows=0), ["password"], False, None),
])
def test_a_reused_diff_keeps_its_rows_only_if_this_project_would(tmp_path, settings, masked, kept, note) -> None:
    """`masked=None`: a diff recorded before masking existed (its values in clear)."""
    prod = dev_plan(tmp_path, "prod")
    prod.backfills.clear()
    new, old = prod.snapshots["s.m"].table_name, prod.previous["s.m"].table_name
    row = ["1", "11", "10", "***", "***"] if masked else ["1", "11", "10", "pw-SEKRET-1", "pw-SEKRET-2"]
    diff = _computed(new, old, sample=[row], masked_columns=masked)
    reused, _ = reused_data_diffs(prod, Records([_record("d" * 10, {"s.m": diff})]), settings)
    d = reused["s.m"]
    assert (d.sample == [row], bool(d.sample_columns), d.note) == (kept, kept, note)
    assert d.changed == 1 and d.column_changes == {"v": 1, "password": 1}  # the counts stay
    assert diff.sample == [row]  # the dev plan's record is untouched


def test_each_model_keeps_the_rows_its_settings_say() -> None:
    index = ModelIndex({"s.a": ["pii"], "s.b": []}, {})
    rows = SampleRows.per_model(DataDiffSettings(no_samples=["tag:pii"], sample_rows=3), index)
    assert (rows["s.a"].limit, rows["s.a"].off, rows["s.b"].limit, rows["s.b"].off) == (0, NO_ROWS, 3, None)
    none = SampleRows.per_model(DataDiffSettings(no_samples=["tag:pii"], sample_rows=0), index)
    assert {(r.limit, r.off) for r in none.values()} == {(0, None)}  # sample_rows: 0 says nothing per model
    assert rows["s.b"].shown(["email"], ["v", "api_key"], ("a@b.c", 1, None, "k1", "k2")) == [
        "***", "1", "NULL", "***", "***"]
