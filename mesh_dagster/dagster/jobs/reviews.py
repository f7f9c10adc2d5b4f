"""Reviewed plans in Dagster: `plan_<env>` computes and records a plan; `apply_plan_<env>` applies one.

The plan job never starts Spark. Like `mesh plan`, it runs the project's linter first (`lint_gate`,
which the promote and restate jobs call too): an error fails it before anything is planned. Its run
page carries the summary as Markdown (changes, categories, diffs, backfill scope) and each affected
asset gets an observation with its pending category, so the asset pages say what the plan would do
to them; the plan's data diff joins that run page once an apply has computed it (plan_pages.py).
The apply job is gated exactly like `mesh plans apply`: approved (on a protected environment) and
still the plan that was reviewed, else the run fails and nothing runs. Like it, it does not lint:
the plan was linted when it was made (unless `mesh plan --skip-linter` made it), and the rules are
no part of a plan.
"""


from collections.abc import Sequence

from dagster import (
    AssetObservation,
    DefaultSensorStatus,
    Enum,
    EnumValue,
    Field,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    TableColumn,
    TableRecord,
    TableSchema,
    job,
    op,
    sensor,
)

from mesh_dagster.context import Context, LinterErrors, PlanOptions
from mesh_dagster.core.config.display import printable
from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.plan.flags import JOB_FLAGS, FlagValue, PlanFlag, flag_spelling, plan_options
from mesh_dagster.core.plan.review import PlanRecord
from mesh_dagster.dagster.jobs.plan_pages import mark_plan_run, post_data_diffs
from mesh_dagster.dagster.mapping.graph import ProjectGraph
from mesh_dagster.dagster.mapping.listener import DagsterLogListener
from mesh_dagster.dagster.mapping.outcomes import JobFailed
from mesh_dagster.dagster.mapping.shown_text import shown_metadata

# Both jobs work from this project's files (a plan records what is to be reviewed; a recorded plan
# made from a pushed commit is rebuilt from that commit's files), never a deployed commit's copy.


def plan_job(environment: str) -> JobDefinition:
    @op(name=f"plan_{environment}_changes", required_resource_keys={"mesh"}, out=Out(Nothing),  # no IO manager
        config_schema={**{flag.name: config_field(flag) for flag in JOB_FLAGS}, "author": AUTHOR_FIELD},
        description=f"Compare the project with '{environment}' and record the plan for review.")
    def _plan(context: OpExecutionContext):
        mesh = context.resources.mesh.get_context()
        try:
            linted = lint_gate(context, mesh)
            config = {k: v for k, v in context.op_config.items() if k != "author"}  # the rest are plan flags
            options = PlanOptions.of(plan_options(config, mesh.select), allow_empty=True)
            plan = mesh.plans.categorized(environment, options, config.get("categorize", []))
            record = mesh.reviews.record(plan, plan_author(context))
        except MeshError as e:
            raise JobFailed(str(e)) from None
        # where its data diff will be shown (a prod plan's reused diff is shown already)
        mark_plan_run(context.instance, context.run_id, record.plan_id, bool(record.summary.data_diffs))
        for observation in observations(record, environment, f"pending in plan {record.plan_id[:8]}", {}):
            context.log_event(observation)
        protected = mesh.config.protection(environment) is not None  # Context decides
        next_step = (f"approve with review_plan_{environment} (or `mesh plans approve {record.plan_id[:8]}`), then "
                     f"launch apply_plan_{environment}" if protected else
                     f"launch apply_plan_{environment} with this plan")
        yield Output(None, metadata=shown_metadata({
            "plan_id": record.plan_id, "status": record.status.value, "author": record.author,
            "git_commit": record.git_commit or "", "next": next_step,
            "summary": MetadataValue.md(record.summary.markdown(environment)), **data_diff_metadata(record),
            **review_metadata(record), **linted}))

    @job(name=f"plan_{environment}", tags={"mesh/environment": environment, "mesh/plan": "true"},
         description=f"Make and record a plan for '{environment}' (review it, then apply_plan_{environment}).")
    def _job():
        _plan()

    return _job


AUTHOR_FIELD = Field(str, is_required=False, description="Who makes the plan (your e-mail): the plan's author, whom "
                                                        "its approvers may not be. By default the user Dagster says "
                                                        "launched the run, else `dagster run <id>`.")
USER_TAGS = ("user", "dagster/user")  # the tags naming who launched a run, where a Dagster deployment sets them


def plan_author(context: OpExecutionContext) -> str:
    """Who makes a plan launched from Dagster: the config's `author`, else the user the run's tags
    name, else the run itself, never the e-mail of whoever started the Dagster process."""
    given = str(context.op_config.get("author") or "").strip()
    tagged = next((context.run.tags[t] for t in USER_TAGS if context.run.tags.get(t)), None)
    return given or tagged or f"dagster run {context.run_id[:8]}"


# What each kind of plan flag is in the job's config (core/plan/flags.py describes the flags once).
_CONFIG_TYPES = {FlagValue.TIME: str, FlagValue.ENVIRONMENT: str, FlagValue.SWITCH: bool, FlagValue.SELECTORS: [str],
                 FlagValue.CATEGORIES: [str], FlagValue.COUNT: int}
_CONFIG_DEFAULTS = {FlagValue.SWITCH: False, FlagValue.SELECTORS: [], FlagValue.CATEGORIES: [], FlagValue.COUNT: 0}


def config_field(flag: PlanFlag) -> Field:
    """The plan job's config field of one plan flag: `mesh plan`'s flag of the same name."""
    default = flag.default if flag.default is not None else _CONFIG_DEFAULTS.get(flag.value)
    shown = f"{flag.help} (`mesh plan {flag_spelling(flag)}`)"
    if default is None:
        return Field(_CONFIG_TYPES[flag.value], is_required=False, description=shown)
    return Field(_CONFIG_TYPES[flag.value], default_value=default, description=shown)


# The recorded plans an apply may take: waiting for a review, approved, or failed (applied again, it resumes).
WAITING = ("pending", "approved", "failed")


def plan_choice(environment: str, records: Sequence[PlanRecord], job: str) -> dict[str, Field]:
    """The config fields naming the plan a job acts on: `plan`, picked from a list of `records` (the
    launchpad offers them; the list is as the code location last loaded, which `mesh ui` reloads when
    plans are recorded or decided), or `plan_id`, typed (a unique prefix of the id will do)."""
    fields = {"plan_id": Field(str, is_required=False, description="The recorded plan's id (or a unique prefix), "
                                                                    "when it is not in `plan`'s list.")}
    if records:
        values = [EnumValue(r.plan_id, description=_choice_line(r)) for r in records]
        fields["plan"] = Field(Enum(f"{job}_plans", values), is_required=False,
                               description=f"A recorded plan of '{environment}': pick one of the list.")
    return fields


def _choice_line(record: PlanRecord) -> str:
    names = [c.name for c in record.summary.changes]
    changes = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    return printable(f"{record.status.value}, by {record.author}" + (f": {changes}" if changes else ": no changes"))


def chosen_plan(config: dict) -> str:
    """The plan the job's config names (`plan_choice`), or the error saying how to name one."""
    chosen = config.get("plan") or config.get("plan_id")
    if not chosen:
        raise JobFailed("No plan given: pick one in `plan` (a list of the recorded plans) or give `plan_id`")
    return str(chosen)


def apply_plan_job(environment: str, waiting: Sequence[PlanRecord] = ()) -> JobDefinition:
    @op(name=f"apply_plan_{environment}_record", out=Out(Nothing), required_resource_keys={"mesh"},
        pool=f"mesh_promote_{environment}",
        config_schema=plan_choice(environment, waiting, f"apply_plan_{environment}"),
        description=f"Apply a recorded plan of '{environment}' if it is approved and still what was reviewed.")
    def _apply(context: OpExecutionContext):
        mesh = context.resources.mesh.get_context()
        try:
            record = mesh.reviews.records.find(chosen_plan(context.op_config))
            if record.environment != environment:
                raise MeshError(f"Plan {record.plan_id} is for '{record.environment}', not '{environment}': "
                                f"launch apply_plan_{record.environment}")
            listener = DagsterLogListener(context.log)
            done = mesh.reviews.apply_recorded(record.plan_id, listener)
        except MeshError as e:
            raise JobFailed(str(e)) from None
        context.log.info(f"Plan {done.plan_id} {done.status.value} in '{environment}'")
        yield Output(None, metadata={"plan_id": done.plan_id, "status": done.status.value,
                                     **data_diff_metadata(done), **review_metadata(done),
                                     **backfill_took(done, listener.work_s, context)})

    @job(name=f"apply_plan_{environment}", tags={"mesh/environment": environment, "mesh/apply_plan": "true"},
         description=f"Apply a recorded plan to '{environment}' (approved, if the environment is protected).")
    def _job():
        _apply()

    return _job


def review_plan_job(environment: str, pending: Sequence[PlanRecord] = ()) -> JobDefinition:
    """`review_plan_<env>` (a protected environment's): approve or reject a pending plan as the
    approver the config names, under the environment's rules (its approvers; no self-approval unless
    allowed), as `mesh plans approve/reject` does."""
    @op(name=f"review_plan_{environment}_decision", out=Out(Nothing), required_resource_keys={"mesh"},
        config_schema={**plan_choice(environment, pending, f"review_plan_{environment}"),
                       "decision": Field(Enum(f"review_plan_{environment}_decisions",
                                              [EnumValue("approve"), EnumValue("reject")]),
                                         description="approve, or reject"),
                       "approver": Field(str, description=f"Who decides: one of '{environment}''s approvers (their "
                                                          "e-mail, as config.yaml lists them)."),
                       "note": Field(str, is_required=False, description="Why (kept with the decision).")},
        description=f"Approve or reject a pending plan of '{environment}', as one of its approvers.")
    def _review(context: OpExecutionContext):
        config = context.op_config
        mesh = context.resources.mesh.get_context()
        try:
            record = mesh.reviews.records.find(chosen_plan(config))
            if record.environment != environment:
                raise MeshError(f"Plan {record.plan_id} is for '{record.environment}', not '{environment}'")
            done = mesh.reviews.records.decide(record.plan_id, config["decision"], config["approver"].strip(),
                                               config.get("note"))
        except MeshError as e:
            raise JobFailed(str(e)) from None
        context.log.info(printable(f"Plan {done.plan_id} {done.status.value} by {done.events[-1].actor}"))
        next_step = f"launch apply_plan_{environment} with this plan" if done.status.value == "approved" else ""
        yield Output(None, metadata=shown_metadata({"plan_id": done.plan_id, "status": done.status.value,
                                                    "decided_by": done.events[-1].actor, "next": next_step}))

    @job(name=f"review_plan_{environment}", tags={"mesh/environment": environment, "mesh/review_plan": "true"},
         description=f"Approve or reject a pending plan of '{environment}' (then apply_plan_{environment}).")
    def _job():
        _review()

    return _job


def backfill_took(record: PlanRecord, work_s: float, context: OpExecutionContext) -> dict[str, MetadataValue]:
    """What the applied plan's backfill took beside its estimate (logged, and as the run's
    `backfill` entry), as `mesh plan` says it after an apply; nothing when nothing was estimated or
    computed here (a pushed commit's plan is applied in a git worker)."""
    estimate = record.summary.estimate
    if estimate is None or not estimate.known or work_s <= 0:
        return {}
    line = estimate.took(work_s)
    context.log.info(line)
    return {"backfill": MetadataValue.text(line)}


def review_metadata(record: PlanRecord) -> dict[str, MetadataValue]:
    """What the review says besides the changes, as metadata of its own: `linter` (ran, skipped by
    whom, or off by config) and `environment_statements` (what before_all / after_all the apply runs,
    as a diff when the plan changes them)."""
    linter, statements = record.summary.linter_line(), record.summary.statements_markdown()
    return {**({"linter": MetadataValue.text(linter)} if linter else {}),
            **({"environment_statements": MetadataValue.md(statements)} if statements else {})}


def lint_gate(context: OpExecutionContext, mesh: Context) -> dict[str, MetadataValue]:
    """The linter run `mesh plan` makes before planning (Context decides): each finding in the run's
    log; an error raises Context's LinterErrors, which the job reports as its one line like any
    refusal, before anything is planned. The warnings are also returned as the step's metadata.
    Never called while loading the definitions (they plan every environment to draw the graph)."""
    try:
        report = mesh.lint_gate()
    except LinterErrors as e:
        _log_findings(context, e.report.findings)
        raise
    _log_findings(context, report.findings)
    if not report.warnings:
        return {}
    return {"linter_warnings": MetadataValue.text("\n".join(str(f) for f in report.warnings))}


def _log_findings(context: OpExecutionContext, findings: list) -> None:
    for finding in findings:
        if finding.error:
            context.log.error(printable(f"Linter error: {finding}"))
        else:
            context.log.warning(printable(f"Linter warning: {finding}"))


def plan_status_sensor(graph: ProjectGraph, project_dir: str, gateway: str | None, state_url: str | None,
                       running: bool, repos: Sequence[str] = ()) -> SensorDefinition:
    """Every change of a recorded plan's status (made from the CLI, Dagster or the git sensor)
    becomes an observation on each asset the plan touches, so the asset pages show the plan's life:
    pending, approved by whom, applied, superseded...; and a plan's data diff, once attached, joins
    the page of the plan_<env> run that recorded it (plan_pages.py)."""

    environment = graph.environment

    @sensor(name=f"plan_status_{environment}_sensor", minimum_interval_seconds=graph.sensor_interval_s,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description=f"Shows the status changes of '{environment}' plans on the assets they touch.")
    def _sensor(context: SensorEvaluationContext):
        since = int(context.cursor or 0)
        ctx = Context(project_dir, gateway, state_url=state_url, repos=repos)
        try:
            records = ctx.plan_records(environment, limit=200)
        except MeshError as e:
            return SkipReason(printable(f"Cannot read the plan records: {e}"))
        finally:
            ctx.close()
        # A diff is attached after its apply's status change (no new status): looked for on every tick
        diffed = {r.plan_id: r for r in records if r.summary.data_diffs}
        post_data_diffs(context.instance, environment,
                        lambda plan_id: data_diff_metadata(diffed[plan_id]) if plan_id in diffed else None)
        changed = [r for r in records if r.updated_ts > since]
        if not changed:
            return SkipReason("No plan changed status")
        events = []
        for record in sorted(changed, key=lambda r: r.updated_ts):
            actor, note = (record.events[-1].actor, record.events[-1].note or "") if record.events else ("", "")
            events += observations(record, environment, f"plan {record.plan_id[:8]} {record.status.value}",
                                   {"mesh/plan_status": record.status.value, "mesh/decided_by": actor,
                                    "mesh/note": note})
        return SensorResult(asset_events=events, cursor=str(max(r.updated_ts for r in changed)))

    return _sensor


def observations(record: PlanRecord, environment: str, description: str,
                 metadata: dict[str, str]) -> list[AssetObservation]:
    """An observation on each asset `record` touches, with the change and its category (removed
    models have no asset any more, standalone audits never had one)."""
    out = []
    for change in record.summary.changes:
        if change.change == "removed" or change.name in record.summary.standalone_audits:  # no asset
            continue
        schema, _, table = view_name(change.name, environment).rpartition(".")
        out.append(AssetObservation(asset_key=[schema, table], description=description,
                                    metadata=shown_metadata({"mesh/plan_id": record.plan_id,
                                                             "mesh/pending_change": change.change,
                                                             "mesh/pending_category": change.category_words,
                                                             **metadata})))
    return out


DIFF_COLUMNS = (("model", "string"), ("grain", "string"), ("old_rows", "int"), ("new_rows", "int"),
                ("only_new", "int"), ("only_old", "int"), ("changed", "int"), ("unchanged", "int"),
                ("note", "string"))


def data_diff_metadata(record: PlanRecord) -> dict[str, MetadataValue]:
    """The plan's data diff as run metadata: `data_diff` a table (one row per model), and
    `data_diff_details` the Markdown with the changed columns and sample rows; `data_diff` says
    it is pending while the apply has not built the new tables. Nothing for a plan without one."""
    summary = record.summary
    if not summary.data_diffs:
        if not summary.data_diff_pending:
            return {}
        return {"data_diff": MetadataValue.text(f"pending for {', '.join(summary.data_diff_pending)}: computed "
                                                f"once apply_plan_{record.environment} has built the new tables, then "
                                                "added to this run's log")}
    records = [TableRecord(data={k: v for k, v in {
        "model": d.model, "grain": ", ".join(d.grain) or "none", "old_rows": d.old_rows, "new_rows": d.new_rows,
        "only_new": d.only_new, "only_old": d.only_old, "changed": d.changed, "unchanged": d.unchanged,
        "note": d.note_text()}.items() if v is not None}) for d in summary.data_diffs.values()]
    schema = TableSchema(columns=[TableColumn(name, kind) for name, kind in DIFF_COLUMNS])
    details = summary.data_diff_markdown()
    return shown_metadata({"data_diff": MetadataValue.table(records, schema=schema),
                           "data_diff_details": MetadataValue.md(details)})
