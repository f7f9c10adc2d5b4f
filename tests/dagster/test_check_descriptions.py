"""An AUDIT block's `description` is what its Dagster asset check says first."""

from __future__ import annotations

from types import SimpleNamespace

from dagster import AssetKey

from mesh_dagster.core.models.kinds import KindName, ModelKind
from mesh_dagster.core.models.model import Audit, AuditRef, Model
from mesh_dagster.dagster.assets import check_specs
from mesh_dagster.dagster.mapping.graph import audit_checks


def test_audit_description_reaches_the_asset_check() -> None:
    audits = {"positive": Audit(name="positive", query="SELECT 1", description="Amounts are never negative")}
    model = Model(name="s.m", kind=ModelKind(name=KindName.FULL), query="SELECT 1 AS x",
                  audits=[AuditRef(name="positive"), AuditRef(name="not_null", args={"columns": "(x)"})])
    checks = audit_checks(model, audits)
    specs = check_specs(SimpleNamespace(key=("s", "m"), asset_key=AssetKey(["s", "m"]), checks=checks,
                                        environment="prod"))
    plan, described, builtin = specs
    assert plan.name == "serves_current_code" and not plan.blocking
    assert described.description.startswith("Amounts are never negative\n\nAudit `positive`")
    assert builtin.description.startswith("Audit `not_null` (columns := (x))")
