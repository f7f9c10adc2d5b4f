"""`MeshTranslator`: every decision of how a mesh model looks in Dagster, one method each.

Asset key, group, description, metadata, tags, kinds, owners, automation condition, freshness and the
partitions definition of an interval unit: the asset decorators, schedules and the re-stamp
sensor only ask this object, so a subclass (or a component's `translation:` in YAML) changes the
whole code location consistently. Overriding one method changes one decision.

What is not a mapping decision stays out: the code version is the snapshot fingerprint and the
dependencies are the models' (staleness and runs rely on both), and checks are the audits and
the plan check (plan_check.py).
"""

from __future__ import annotations

import re
from typing import Any

from dagster import (
    AssetKey,
    AssetSpec,
    AutomationCondition,
    FreshnessPolicy,
    MetadataValue,
    TableColumn,
    TableColumnDep,
    TableColumnLineage,
    TableMetadataValue,
    TableRecord,
    TableSchema,
    TimeWindowPartitionsDefinition,
)

from mesh_dagster.core.config.display import has_hidden, markdown_fence
from mesh_dagster.core.config.names import PROD, view_name
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.core.time.dates import ms_to_datetime
from mesh_dagster.dagster.mapping.automation import cron_condition
from mesh_dagster.dagster.mapping.freshness import cron_freshness
from mesh_dagster.dagster.mapping.model_asset import ADDED, UNCHANGED, ModelAsset
from mesh_dagster.dagster.mapping.partitions import partition_format
from mesh_dagster.dagster.mapping.shown_text import shown_spec

TAG_KEY_LIMIT = 63
_NOT_IN_TAG_KEYS = re.compile(r"[^A-Za-z0-9_.-]")
_NOT_IN_GROUP_NAMES = re.compile(r"[^A-Za-z0-9_]")
EXTERNAL_GROUP = "external"


def storage_kind(asset: ModelAsset) -> str:
    """What the environment's view points at, as a kind the UI draws as an icon: a seed, a view, or
    a table (every other kind)."""
    kind = asset.model.kind
    return "seed" if kind.seed is not None else "view" if kind.is_view else "table"


def model_summary(asset: ModelAsset) -> str:
    """What the model is, from its definition, for a model without a `description`: its kind (and
    time column), cadence, start, grain, the models it reads and where it is defined."""
    model = asset.model
    kind = model.kind.name.value.replace("_", " ").lower().replace("scd type 2", "SCD type 2")
    parts = [f"{kind[0].upper()}{kind[1:]} model" + (f" on `{model.time_column}`" if model.time_column else "")]
    parts.append(f"runs `{model.cron}`" + (f" ({model.cron_tz})" if model.cron_tz else ""))
    if asset.start_ms is not None:
        parts.append(f"from {ms_to_datetime(asset.start_ms):%Y-%m-%d}")
    if model.grain:
        parts.append(f"grain {', '.join(model.grain)}")
    if asset.parents:
        parts.append(f"reads {', '.join(asset.parents)}")
    return "; ".join(parts) + f". Defined in {model.where()}."


def plan_line(asset: ModelAsset) -> str | None:
    """`mesh plan`'s word on the model, in one line (None when the environment has it as planned)."""
    if asset.change == UNCHANGED:
        return None
    env = asset.environment
    if asset.is_partitioned:
        work = f"{asset.recompute} partition(s) to recompute, {asset.reuse} reused"
    elif asset.recompute:
        work = "to build" if asset.is_timeless else "to rebuild"
    else:
        work = "reused, nothing to recompute"
    state = "New" if asset.change == ADDED else f"Pending change ({asset.change.label})"
    return f"{state} in {env}: {work}. `mesh plan {env}` applies it; in Dagster, materialize then promote_{env}."


def column_lineage(asset: ModelAsset) -> TableColumnLineage:
    """Each output column's upstream columns, as the asset keys of the environment's assets (the
    UI's column lineage view follows them; a column with none reads no table)."""
    return TableColumnLineage(deps_by_column={
        column: [TableColumnDep(asset_key=key, column_name=upstream) for key, upstream in deps]
        for column, deps in (asset.column_deps or {}).items()})


def lineage_metadata(asset: ModelAsset) -> dict[str, Any]:
    """Both forms of the column lineage, for a model that computes its columns (not a seed)."""
    if asset.column_deps is None or asset.model.kind.seed:
        return {}
    return {"dagster/column_lineage": column_lineage(asset), "mesh/column_lineage": column_lineage_table(asset)}


LINEAGE_TABLE_SCHEMA = TableSchema(columns=[
    TableColumn("column", "string", description="a column of this asset"),
    TableColumn("reads", "string", description="the upstream asset columns it is computed from"),
])


def column_lineage_table(asset: ModelAsset) -> TableMetadataValue:
    """The same lineage as a table the open-source UI shows on the asset's page: Dagster 1.13's UI
    draws `dagster/column_lineage` only in Dagster+ and leaves the canonical entry out of its
    metadata tables, so without this a user of the open-source UI would see no lineage at all."""
    def reads(deps: list[tuple[AssetKey, str]]) -> str:
        return ", ".join(f"{key.to_user_string()}.{upstream}" for key, upstream in deps) or "(no table column)"

    return MetadataValue.table(
        records=[TableRecord({"column": column, "reads": reads(deps)})
                 for column, deps in (asset.column_deps or {}).items()],
        schema=LINEAGE_TABLE_SCHEMA)


def code_block(text: str, language: str) -> str:
    """`text` as a fenced code block that no backtick run in it can close early."""
    fence = markdown_fence(text)
    return f"{fence}{language}\n{text}\n{fence}"


def tag_key(tag: str) -> str:
    """A model tag as a Dagster tag key. Dagster refuses keys with characters other than letters,
    digits, '_', '-' and '.', or longer than 63 (bar one `prefix/`): those become '_' and the key is
    cut. A '/' becomes '_' too, so no tag lands in Dagster's or mesh's namespace (`dagster/...`)."""
    return _NOT_IN_TAG_KEYS.sub("_", tag.strip())[:TAG_KEY_LIMIT]


class MeshTranslator:
    """How models become Dagster assets. Subclass it and override a method to change one decision:

        class MyTranslator(MeshTranslator):
            def get_group_name(self, asset):
                return asset.model.schema_name

        defs = definitions("path/to/project", translator=MyTranslator())

    Every method receives the `ModelAsset` (graph.py): the model (`asset.model`), its name, the
    environment, its change against the environment, fingerprint, version and physical table,
    and (for `get_asset_spec`) its key and parents' keys, already translated.
    """

    # -- keys and grouping ---------------------------------------------------------------------
    def get_asset_key(self, asset: ModelAsset) -> AssetKey:
        """The model's view in the environment (`sqlmesh_example__dev.full_model` in dev); an
        external table is the same table in every environment, so its own name. Asked first,
        parents before children: `asset.key` is not set yet (`asset.deps`, the parents' keys,
        is). Keys must be unique (two models on one key are refused)."""
        if asset.is_external:
            return AssetKey(asset.name.split("."))
        schema, _, table = view_name(asset.name, asset.environment).rpartition(".")
        return AssetKey([*schema.split("."), table])

    def get_group_name(self, asset: ModelAsset) -> str | None:
        """The key's prefix (the view's schema): a group per schema and environment."""
        if asset.is_external:
            return EXTERNAL_GROUP
        return _NOT_IN_GROUP_NAMES.sub("_", "__".join(asset.key[:-1])) or "default"

    # -- what the UI shows -----------------------------------------------------------------------
    def get_description(self, asset: ModelAsset) -> str:
        """The plan's change to the model, when there is one (the catalog shows this first line),
        then the model's own description."""
        model = asset.model
        if asset.is_external:
            return model.description or f"External table `{asset.name}`"
        own = model.description or model_summary(asset)
        pending = plan_line(asset)
        return f"{pending}\n\n{own}" if pending else own

    def get_kinds(self, asset: ModelAsset) -> set[str]:
        """The kinds the graph and the catalog show on every asset, all drawn as icons: the engine,
        the storage (`table`, `view`, `seed`) and python for a Python model. No words: the catalog
        gives kinds and name one column, and a kind in words (`incremental_by_time_range`, a plan's
        category) cuts the name down to "sqlme…model". The model kind is in the `mesh/kind` tag and
        the description; the plan in the description's first line and the `serves_current_code`
        check (dagster/mapping/plan_check.py)."""
        if asset.is_external:
            return {"spark"}
        return {"spark", storage_kind(asset), *(["python"] if asset.model.is_python else [])}

    def get_tags(self, asset: ModelAsset) -> dict[str, str]:
        """The model's tags as labels (key = the tag, value empty) to filter assets by, plus its kind."""
        if asset.is_external:
            return {}
        model = asset.model
        tags = {key: "" for key in (tag_key(t) for t in model.tags) if key}
        return {**tags, "mesh/kind": model.kind.name.value}

    def get_owners(self, asset: ModelAsset) -> list[str] | None:
        """The model's `owner` when it is an e-mail address (Dagster accepts e-mails and
        `team:name`) with no hidden character; any other owner is still shown in the metadata."""
        owner = asset.model.owner
        if not owner or "@" not in owner or has_hidden(owner) or asset.is_external:
            return None  # escaped (shown_text.py), hidden characters would make it no address Dagster takes
        return [owner]

    def get_metadata(self, asset: ModelAsset) -> dict[str, Any]:
        if asset.is_external:
            meta: dict[str, Any] = {"mesh/kind": "EXTERNAL", "dagster/table_name": asset.name}
            if asset.columns:
                meta["dagster/column_schema"] = TableSchema(
                    columns=[TableColumn(name=c, type=t or "unknown") for c, t in asset.columns.items()])
            return meta
        model = asset.model
        meta = {
            "mesh/model": model.name,
            **lineage_metadata(asset),  # first: the UI lists entries in this order, and this one is read most
            "mesh/kind": model.kind.name.value,
            "mesh/cron": model.cron,
            "mesh/change": asset.change.label,
            "mesh/fingerprint": asset.fingerprint,
            "dagster/table_name": ".".join(asset.key),
        }
        if asset.table:
            meta["mesh/physical_table"] = asset.table
            meta["mesh/version"] = asset.version
        if model.cron_tz:
            meta["mesh/cron_tz"] = model.cron_tz
        if model.declared_unit is not None:
            meta["mesh/interval_unit"] = model.declared_unit.value
        if model.allow_partials:
            meta["mesh/allow_partials"] = True
        if model.signals:
            meta["mesh/signals"] = ", ".join(ref.describe() for ref in model.signals)
        if model.owner:
            meta["mesh/owner"] = model.owner
        if asset.start_ms is not None:
            meta["mesh/start"] = ms_to_datetime(asset.start_ms).strftime("%Y-%m-%d %H:%M")
        if model.grain:
            meta["mesh/grain"] = ", ".join(model.grain)
        if model.path:
            meta["mesh/file"] = model.where()
        if asset.columns:
            meta["dagster/column_schema"] = TableSchema(
                columns=[TableColumn(name=c, type=(t or "unknown"), description=model.column_descriptions.get(c))
                         for c, t in asset.columns.items()]
            )
        if asset.pending_columns and asset.pending_columns != asset.columns:
            meta["mesh/pending_columns"] = TableSchema(  # the new version's, once the environment serves it
                columns=[TableColumn(name=c, type=t or "unknown") for c, t in asset.pending_columns.items()])
        if model.query:
            meta["mesh/query"] = MetadataValue.md(code_block(model.query.strip(), "sql"))
        if model.python is not None:
            meta["mesh/python"] = MetadataValue.md(code_block(model.python.source().rstrip("\n"), "python"))
        return meta

    # -- automation and partitions ------------------------------------------------------------------
    def get_automation_condition(self, asset: ModelAsset) -> AutomationCondition | None:
        """Prod's models run as `mesh run` runs them: each due interval once its parents have
        recorded it and its signals pass (automation.py), launched by `automation_prod_sensor` once
        it is started. None in other environments (their plans fill them) and for external tables.

        Return Dagster's own to run a model another way, or None to leave it to the schedules:

            def get_automation_condition(self, asset):
                if "hourly_refresh" in asset.model.tags:
                    return AutomationCondition.on_cron("0 * * * *")
                return super().get_automation_condition(asset)
        """
        return cron_condition(asset) if asset.environment == PROD else None

    def get_freshness_policy(self, asset: ModelAsset) -> FreshnessPolicy | None:
        """How late a prod model may be before the asset health view shows it late, from its cron
        (freshness.py); None for seeds, views, external tables and other environments (not run on
        a cron). A deadline of your own, say done by 09:00 each day:

            def get_freshness_policy(self, asset):
                return FreshnessPolicy.cron("0 9 * * *", lower_bound_delta=timedelta(hours=9))
        """
        return cron_freshness(asset) if asset.environment == PROD else None

    def get_partitions_def(self, unit: IntervalUnit, start_ms: int) -> TimeWindowPartitionsDefinition:
        """The partitions of every model whose intervals are `unit`s, from `start_ms` (the earliest
        start among them). Keys, boundaries and the UTC time zone must stay the intervals' (the
        partition runs, schedules and re-stamps compute with them); the start may move later to
        show fewer partitions: intervals before it are simply not offered as partitions."""
        return TimeWindowPartitionsDefinition(
            start=ms_to_datetime(unit.floor(start_ms)),
            cron_schedule=unit.cron_expression,
            fmt=partition_format(unit),
            timezone="UTC",
        )

    # -- the spec, composed ----------------------------------------------------------------------------
    def get_asset_spec(self, asset: ModelAsset) -> AssetSpec:
        """The spec, from the methods above. The key and dependencies are the graph's (already
        translated by `get_asset_key`), the code version the snapshot fingerprint. Its text is
        shown escaped (shown_text.py): a method may return the user's text as it is."""
        spec_kwargs: dict[str, Any] = dict(
            key=asset.asset_key,
            description=self.get_description(asset),
            metadata=self.get_metadata(asset),
            group_name=self.get_group_name(asset),
            kinds=self.get_kinds(asset),
            tags=self.get_tags(asset),
            owners=self.get_owners(asset),
            automation_condition=self.get_automation_condition(asset),
            freshness_policy=self.get_freshness_policy(asset),
        )
        if not asset.is_external:
            spec_kwargs.update(deps=asset.dep_keys, code_version=asset.fingerprint, skippable=True)
        return shown_spec(AssetSpec(**spec_kwargs))
