"""`MeshProjectComponent`: a mesh project as a Dagster component, loaded from `defs.yaml` by `dg`.

    type: mesh_dagster.MeshProjectComponent
    attributes:
      project: ../../../mesh_project     # relative to this defs.yaml's folder
      environments: [prod, dev]
      translation:
        group_name: "{{ model.schema }}"
        tags: {team: analytics}
        owners: ["team:data"]
        automation_condition: "{{ dg.AutomationCondition.on_cron('0 6 * * *') }}"
      pyspark:                            # a dagster-pyspark PySparkResource: the runs' Spark settings
        spark_config: {spark.sql.shuffle.partitions: "8"}

The component builds what `definitions()` builds. Its `translation:` is Dagster's standard
asset-attributes block (the one every 1.13 component takes), evaluated once per model with the
template variables `model` (plain values: name, schema, table, kind, cron, tags, owner,
environment, change, ...) and `asset` (the `ModelAsset`) on top of the `MeshTranslator`'s spec;
for full control, subclass the component and return your own translator from `get_translator`.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from dagster import (
    AssetAttributesModel,
    AssetKey,
    AssetSpec,
    Component,
    ComponentLoadContext,
    Definitions,
    Resolvable,
    Resolver,
    Scaffolder,
    ScaffoldRequest,
    TimeWindowPartitionsDefinition,
    scaffold_component,
    scaffold_with,
)
from jinja2.nativetypes import NativeTemplate
from pydantic import BaseModel

from mesh_dagster.core.config.names import PROD
from mesh_dagster.core.time.cron import IntervalUnit
from mesh_dagster.dagster.code_location import definitions
from mesh_dagster.dagster.compat import (
    context_at,
    context_scope,
    resolve_spec_attributes,
    translated_spec,
    translation_resolver,
)
from mesh_dagster.dagster.mapping.graph import ModelAsset
from mesh_dagster.dagster.mapping.shown_text import shown_spec
from mesh_dagster.dagster.mapping.translator import MeshTranslator
from mesh_dagster.scaffold.init import init_project

# What a `translation:` may not change, and why: the graph, runs and staleness depend on them.
_FIXED = {
    "deps": "the dependencies are the models' own",
    "code_version": "the code version is the snapshot fingerprint, which staleness relies on",
    "partitions_def": "partitions are the models' intervals (override MeshTranslator.get_partitions_def in Python)",
    "skippable": "a run skips the models that have nothing due",
}


def model_template_vars(asset: ModelAsset) -> dict[str, Any]:
    """What `translation:` templates see of a model: `{{ model.name }}`, `{{ model.schema }}`, ..."""
    model = asset.model
    schema, _, table = asset.name.rpartition(".")
    return {
        "model": {
            "name": asset.name,
            "schema": schema,
            "table": table,
            "kind": model.kind.name.value,
            "cron": model.cron,
            "tags": list(model.tags),
            "owner": model.owner,
            "description": model.description,
            "environment": asset.environment,
            "change": asset.change.label,
            "fingerprint": asset.fingerprint,
            "version": asset.version,
            "physical_table": asset.table,
            "is_external": asset.is_external,
            "file": model.where() if model.path else None,
            "columns": list(asset.columns or {}),
        },
        "asset": asset,
    }


class TranslatedMeshTranslator(MeshTranslator):
    """A translator with a component's `translation:` applied on top of another's specs.

    A key (`key`, `key_prefix`) set in YAML becomes the model's asset key everywhere (the graph
    asks `get_asset_key` first); attributes the graph and runs depend on are refused by name.
    """

    def __init__(self, base: MeshTranslator, translation: Callable[[AssetSpec, ModelAsset], AssetSpec],
                 sets_key: bool = True):
        self.base = base
        self.translation = translation
        self.sets_key = sets_key  # False when the translation cannot change keys: no evaluation per key

    def get_asset_key(self, asset: ModelAsset) -> AssetKey:
        key = self.base.get_asset_key(asset)
        if not self.sets_key:
            return key
        return self.translation(AssetSpec(key=key), asset).key

    def get_partitions_def(self, unit: IntervalUnit, start_ms: int) -> TimeWindowPartitionsDefinition:
        return self.base.get_partitions_def(unit, start_ms)

    def get_asset_spec(self, asset: ModelAsset) -> AssetSpec:
        base = self.base.get_asset_spec(asset)
        # The translation sees the untranslated key, as it did in `get_asset_key`.
        spec = self.translation(base.replace_attributes(key=self.base.get_asset_key(asset)), asset)
        for attribute, reason in _FIXED.items():
            if getattr(spec, attribute) != getattr(base, attribute):
                raise ValueError(f"translation: `{attribute}` cannot be set for mesh models ({asset.name}): {reason}")
        if spec.key != base.key:
            raise ValueError(f"translation: the key of {asset.name} must not depend on `spec` "
                             f"({spec.key.to_user_string()} at spec time, {base.key.to_user_string()} at key time)")
        return shown_spec(spec)  # `{{ model.description }}` is the user's text as written


def _translation_sets_key(model: Any) -> bool:
    """Whether a `translation:` changes keys (`key`, `key_prefix`): if not, keys need no evaluation."""
    if isinstance(model, BaseModel):
        return bool({"key", "key_prefix"} & model.model_fields_set)
    if isinstance(model, Mapping):
        return bool({"key", "key_prefix"} & set(model))
    return True


class Translation:
    """A resolved `translation:`: `(spec, asset) -> spec`, as Dagster's TranslationFn, evaluated
    with the model's template variables and `spec` (the spec it changes).

    Dagster resolves a translation block by compiling and rendering every string of it, then
    resolving each attribute: about a millisecond per asset, seconds for thousands of models. Here
    each template is compiled once and rendered per model; the attributes are resolved by
    Dagster only for each distinct rendering (a group per schema: a handful) and reused."""

    MERGED = frozenset({"metadata", "tags"})  # merged into the translator's; other attributes replace

    def __init__(self, context: Any, model: Any):
        fixed = sorted(_FIXED.keys() & (model.model_fields_set if isinstance(model, BaseModel) else set()))
        if fixed:
            raise ValueError(f"translation: `{fixed[0]}` cannot be set for mesh models: {_FIXED[fixed[0]]}")
        self.info = translation_resolver(context, model)  # Dagster's own (compat.py)
        self.context = context_at(context, "translation")
        self.model = model if isinstance(model, BaseModel) else None  # a whole-block template string: no cache
        self.raw = model.model_dump(exclude_unset=True) if isinstance(model, BaseModel) else None
        self.sets_key = _translation_sets_key(model)
        self._templates: dict[str, Any] = {}
        self._resolved: dict[str, Mapping[str, Any]] = {}

    def __call__(self, spec: AssetSpec, asset: ModelAsset) -> AssetSpec:
        variables = {**model_template_vars(asset), "spec": spec}
        if self.model is None:
            return translated_spec(self.info, spec, variables)
        rendering = repr(self._render(self.raw, {**context_scope(self.context), **variables}))
        attributes = self._resolved.get(rendering)
        if attributes is None:
            attributes = resolve_spec_attributes(self.model, self.context, variables)
            self._resolved[rendering] = attributes
        return self._apply(spec, attributes)

    def _render(self, value: Any, scope: dict[str, Any]) -> Any:
        """The block with its templates rendered: equal renderings resolve to equal attributes."""
        if isinstance(value, dict):
            return {k: self._render(v, scope) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._render(v, scope) for v in value]
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            template = self._templates.get(value)
            if template is None:
                template = self._templates[value] = NativeTemplate(value)
            return template.render(**scope)
        return value

    def _apply(self, spec: AssetSpec, attributes: Mapping[str, Any]) -> AssetSpec:
        """Dagster's rules for a translation's attributes: a key prefix prefixes the key, tags and
        metadata merge, the rest replaces."""
        attributes = dict(attributes)
        if "code_version" in attributes:
            attributes["code_version"] = str(attributes["code_version"])
        if "key_prefix" in attributes:
            prefix = attributes.pop("key_prefix")
            attributes["key"] = attributes.pop("key", spec.key).with_prefix(prefix)
        replaced = {k: v for k, v in attributes.items() if k not in self.MERGED}
        merged = {k: v for k, v in attributes.items() if k in self.MERGED}
        return spec.replace_attributes(**replaced).merge_attributes(**merged)


def _resolve_translation(context: Any, model: Any) -> Translation | None:
    return None if model is None else Translation(context, model)


class PySparkModel(BaseModel):
    """`pyspark:` in YAML: the fields of dagster-pyspark's `PySparkResource`."""

    spark_config: dict[str, Any] = {}


def _resolve_pyspark(context: Any, model: Any) -> Any:
    if model is None:
        return None
    from dagster_pyspark import PySparkResource  # loads pyspark: only for a component that names one

    config = model.spark_config if isinstance(model, PySparkModel) else dict(model).get("spark_config", {})
    return PySparkResource(spark_config=dict(config or {}))


class MeshProjectScaffoldParams(BaseModel):
    project: str | None = None  # an existing mesh project, relative to the new component's folder
    environments: list[str] | None = None


class MeshProjectScaffolder(Scaffolder[MeshProjectScaffoldParams]):
    """`dg scaffold defs mesh_dagster.MeshProjectComponent PATH [--project DIR] [--environments ...]`:
    a defs.yaml pointing at the project; without `--project`, a new quickstart project (`mesh init`)
    in PATH/project."""

    @classmethod
    def get_scaffold_params(cls) -> type[MeshProjectScaffoldParams]:
        return MeshProjectScaffoldParams

    def scaffold(self, request: ScaffoldRequest[MeshProjectScaffoldParams]) -> None:
        project = request.params.project
        if project is None:
            init_project(request.target_path / "project")
            project = "project"
        scaffold_component(request, {"project": project, "environments": request.params.environments or [PROD]})


@scaffold_with(MeshProjectScaffolder)
@dataclass
class MeshProjectComponent(Component, Resolvable):
    """A mesh project (SQLMesh-style models on Spark) as Dagster assets: one asset per model and
    environment, partitions from the intervals, audits as checks, promote/plan/restate jobs,
    re-stamp and plan-status sensors, and (prod) a schedule per cron and the automation sensor.

    Subclass it and override `get_translator` to map models your own way in Python.
    """

    project: Annotated[str, Resolver.default(
        description="The mesh project's folder (holding config.yaml), relative to this defs.yaml's folder.",
        examples=["../../../mesh_project"])]
    repos: Annotated[list[str], Resolver.default(
        description="The other repositories of a multi-repo project (their folders, relative to this defs.yaml's "
                    "folder): loaded with `project` as one, as `mesh -p project -p repo ...` loads them.",
        examples=[["../../../repo_2"]])] = field(default_factory=list)
    environments: Annotated[list[str], Resolver.default(
        description="The environments to show; each one's models are its own assets and jobs.",
        examples=[["prod"], ["prod", "dev"]])] = field(default_factory=lambda: [PROD])
    gateway: Annotated[str | None, Resolver.default(
        description="The config.yaml gateway to use (default: the project's default gateway).")] = None
    state_url: Annotated[str | None, Resolver.default(
        description="The state store URL, overriding config.yaml (sqlite:///... or postgresql://...).")] = None
    schedules_running: Annotated[bool, Resolver.default(
        description="Start the cron schedules (prod) running instead of stopped.")] = False
    automation_running: Annotated[bool, Resolver.default(
        description="Start the automation sensor (prod: each model's due intervals once its parents have them, "
                    "as `mesh run`) running instead of stopped. A `translation:` automation_condition replaces "
                    "the models' own.")] = False
    git_sensor_running: Annotated[bool, Resolver.default(
        description="Start the git push sensor (prod, with a `git:` section in config.yaml) running.")] = False
    translation: Annotated[
        Translation | None,
        Resolver(
            _resolve_translation,
            model_field_type=AssetAttributesModel,  # (or, as every attribute, one template string)
            inject_before_resolve=False,
            description="Asset attributes applied to every model (group_name, tags, kinds, owners, description, "
                        "metadata, automation_condition, key, key_prefix), templated with `model` and `asset`.",
        ),
    ] = None
    pyspark: Annotated[
        Any,
        Resolver(
            _resolve_pyspark,
            model_field_type=PySparkModel,
            description="A dagster-pyspark PySparkResource (`spark_config:`): the Spark settings of runs, merged "
                        "with the gateway's connection; a key both set differently is refused.",
        ),
    ] = None

    def get_translator(self) -> MeshTranslator:
        """The translator before `translation:` applies: override to return your own `MeshTranslator`."""
        return MeshTranslator()

    def translator(self) -> MeshTranslator:
        translator = self.get_translator()
        if self.translation is None:
            return translator
        return TranslatedMeshTranslator(translator, self.translation, self.translation.sets_key)

    def project_dir(self, context: ComponentLoadContext) -> Path:
        return _folder(self.project, context)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        return definitions(self.project_dir(context), self.environments, gateway=self.gateway,
                           state_url=self.state_url, schedules_running=self.schedules_running,
                           automation_running=self.automation_running,
                           git_sensor_running=self.git_sensor_running, translator=self.translator(),
                           pyspark=self.get_pyspark(), repos=[_folder(repo, context) for repo in self.repos])

    def get_pyspark(self) -> Any:
        """The PySparkResource whose settings runs use (`pyspark:`); override to build your own."""
        return self.pyspark


def _folder(path: str, context: ComponentLoadContext) -> Path:
    """A folder a defs.yaml names: absolute, or relative to the defs.yaml's folder."""
    found = Path(path).expanduser()
    return found if found.is_absolute() else (context.path / found).resolve()
