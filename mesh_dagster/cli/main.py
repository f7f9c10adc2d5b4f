"""The `mesh` command line: thin wrappers over `Context`, formatting only.

Failures are handled once, by the group (`cli/errors.py`): every command, `mesh spark ...`
included, ends a failure with one line and a log file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mesh_dagster.cli.console import (
    console,
    show_diff,
    show_explain,
    show_missing_tables,
    show_plan,
    show_test_report,
    show_warning,
)
from mesh_dagster.cli.errors import EXIT_ERROR, MeshGroup
from mesh_dagster.cli.lint import lint_gate
from mesh_dagster.cli.params import ENVIRONMENT, TIME, environment_name, plan_flags, selector_option
from mesh_dagster.cli.project import project_context
from mesh_dagster.core.config.display import printable_line
from mesh_dagster.core.config.redaction import shorten
from mesh_dagster.core.errors import EngineError, MeshError
from mesh_dagster.core.plan.flags import JOB_FLAGS, plan_options, refuse_in_restatement
from mesh_dagster.core.time.dates import ms_to_datetime

if TYPE_CHECKING:  # Context's modules are imported by the commands that use them (cli/project.py)
    from mesh_dagster.context import PlanOptions


@click.group(cls=MeshGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-p", "--paths", "paths", multiple=True, type=click.Path(file_okay=False),
              help="Path of the project directory (default: the current one). Give it once per repository of a "
                   "multi-repo project: the first repository's settings run the project.")
@click.option("--gateway", default=None, help="Gateway from config.yaml to use (default: default_gateway).")
@click.option("--debug", is_flag=True, envvar="MESH_DEBUG",
              help="On failure, print the full traceback too (it is always in the log file).")
@click.version_option(package_name="mesh_dagster")
@click.pass_context
def cli(ctx: click.Context, paths: tuple[str, ...], gateway: str | None, debug: bool) -> None:
    """mesh: SQLMesh-style plans and virtual data environments on Apache Spark."""
    ctx.ensure_object(dict)
    ctx.obj.update(path=paths[0] if paths else ".", repos=list(paths[1:]), gateway=gateway, debug=debug)


@cli.command()
@click.argument("engine", required=False)
@click.option("-t", "--template", type=click.Choice(["default", "empty"]), default=None,
              help="default: the quickstart example project; empty: configuration and folders only.")
@click.pass_context
def init(ctx: click.Context, engine: str | None, template: str | None) -> None:
    """Create a new project (the quickstart example by default). `mesh init spark` asks nothing."""
    from mesh_dagster.scaffold import init as scaffold  # deliberately lazy: only `mesh init` needs the templates

    if ctx.obj.get("repos"):
        raise click.UsageError("mesh init creates one project: give its folder with one -p")
    path = Path(ctx.obj["path"])
    cli_mode = "default"
    if engine is None:
        click.echo("─" * 30 + "\nWelcome to mesh_dagster!\n" + "─" * 30 + "\n")
        template = _choose("What type of project do you want to set up?", scaffold.PROJECT_TYPES)
        engine = _choose("Choose your SQL engine:", scaffold.ENGINES)
        scaffold.check_engine(engine)
        cli_mode = _choose("Choose your mesh CLI experience:", scaffold.CLI_MODES)
    created = scaffold.init_project(path, engine=engine, template=template or "default", cli_mode=cli_mode)
    click.echo(scaffold.next_steps_message(path.resolve()))
    _ = created


def _choose(question: str, options) -> str:
    items = list(options.items()) if isinstance(options, dict) else [(o, o) for o in options]
    click.echo(question + "\n")
    width = len(str(len(items))) + 2
    for i, (_, label) in enumerate(items, 1):
        click.echo(f"    {f'[{i}]':<{width}} {label}")
    choice = click.prompt("\nEnter a number", type=click.IntRange(1, len(items)))
    click.echo()
    return items[choice - 1][0]


@cli.command()
@click.argument("environment", required=False, type=ENVIRONMENT)
@plan_flags
@click.pass_context
def plan(ctx, environment, **flags) -> None:
    """Compare the project with ENVIRONMENT (default prod), show the changes and apply them."""
    context = project_context(ctx)
    config = context.project.config
    if environment is None:  # an empty name is refused by its type, never taken for the default
        environment = config.default_target_environment
    no_prompts = flags["no_prompts"] or config.plan.no_prompts
    if flags["skip_linter"]:
        context.skip_lint_gate("--skip-linter")  # the plan's review says so
    else:
        lint_gate(context)
    if not flags["skip_tests"] and not flags["explain"] and context.project.test_files:
        report = context.test()
        show_test_report(report)
        if not report.ok:
            raise MeshError("Unit tests failed: fix them or use --skip-tests. Nothing was applied.")
    if flags["restate_model"]:
        refuse_in_restatement(flags)
        p = context.plans.restate(environment, flags["restate_model"], start=flags["start"], end=flags["end"],
                                  execution_time=flags["execution_time"])
    else:
        options = plan_options({f.name: flags[f.name] for f in JOB_FLAGS}, context.select)
        p = _categorized_plan(context, environment, options, flags["categorize"],
                              ask_all=flags["no_auto_categorization"], no_prompts=no_prompts)
    if not flags["explain"]:  # once the plan is made (its selectors checked): a refused plan starts nothing
        context.start_spark_early()  # its JVM starts while the plan is shown and the answer awaited
    show_plan(p, no_diff=flags["no_diff"])
    missing = _missing_tables(context, p)
    show_missing_tables(p, missing)
    if flags["explain"]:
        show_explain(p, context.plans.explain(p))
    elif p.needs_apply or missing:
        _apply_or_record(context, p, auto_apply=flags["auto_apply"] or config.plan.auto_apply, no_prompts=no_prompts,
                         backfills=p.requires_backfill or bool(missing))


def _missing_tables(context, p) -> list:
    """The plan's tables that are gone while their history is recorded (rebuilt when applied); none
    said when Spark cannot answer (busy, unreachable): the apply checks them anyway."""
    try:
        return context.missing_tables(p)
    except EngineError as e:
        show_warning(f"physical tables not checked ({str(e).splitlines()[0]}); applying checks them")
        return []


def _categorized_plan(context, environment: str, options: PlanOptions, categorize: tuple[str, ...], *,
                      ask_all: bool, no_prompts: bool):
    """The plan, made again with the categories the user chose if automatic categorization left
    some to them (`--categorize` values first)."""
    p = context.plans.categorized(environment, options, categorize)
    choices = dict(p.options.choices or {})
    asked = _ask_categories(p, context, choices, ask_all=ask_all, no_prompts=no_prompts)
    return context.plans.plan(environment, options, choices={**choices, **asked}) if asked else p


def _apply_or_record(context, p, *, auto_apply: bool, no_prompts: bool, backfills: bool) -> None:
    """Apply the plan, unless Context holds it for review (a protected environment), prompts are
    off without --auto-apply, or the user declines: then it is only recorded."""
    protection = context.reviews.hold_for_review(p)
    if protection is not None:
        console.print(f"'{p.environment}' is protected: plan {p.plan_id[:8]} is recorded for review. One of "
                      f"{', '.join(protection.approvers) or 'its approvers (none listed yet)'} approves it with "
                      f"`mesh plans approve {p.plan_id[:8]}`; then `mesh plans apply {p.plan_id[:8]}` applies it.")
        return
    if not auto_apply:
        if no_prompts:
            context.reviews.record(p)
            console.print(f"Plan not applied (use --auto-apply to apply without a prompt); recorded as "
                          f"{p.plan_id[:8]}: `mesh plans apply {p.plan_id[:8]}` applies it.")
            return
        question = "Apply - Backfill Tables" if backfills else "Apply - Virtual Update"
        if not click.confirm(question, default=False, prompt_suffix=" [y/n]: ", show_default=False):
            context.reviews.record(p)
            context.decide(p.plan_id, "cancel", "declined at the prompt")
            console.print("Plan not applied.")
            return
    from mesh_dagster.cli.progress import ConsoleListener  # Context's listener: for commands that apply or run

    listener = ConsoleListener()
    try:
        context.reviews.apply(p, listener)
    finally:
        listener.close()
    if p.estimate is not None and p.estimate.known:
        console.print(p.estimate.took(listener.work_s))


def _ask_categories(plan, context, given: dict, *, ask_all: bool, no_prompts: bool) -> dict:
    """The categories the user chooses for the directly modified models automatic categorization
    leaves to them (`--no-auto-categorization`, `plan.auto_categorize_changes`), diff first."""
    from mesh_dagster.context import CATEGORY_CHOICES  # Context's modules: imported by the commands that plan

    ask = [n for n in context.plans.categories_to_choose(plan, ask_all) if n not in given]
    if ask and no_prompts:
        raise MeshError(f"These changes need a category and prompts are off: {', '.join(ask)}. Use "
                        f"--categorize MODEL=breaking|non-breaking|forward-only. Nothing was applied.")
    chosen = {}
    for name in ask:
        show_diff(plan, name)
        proposed = plan.category(name)
        default = next((k for k, v in CATEGORY_CHOICES.items() if v == proposed), "breaking")
        answer = click.prompt(f"Category of {plan.view(name)}", type=click.Choice(list(CATEGORY_CHOICES)),
                              default=default)
        chosen[name] = CATEGORY_CHOICES[answer]
        console.print()
    return chosen


@cli.command()
@click.argument("environment", required=False, default="prod", type=ENVIRONMENT)
@click.option("-s", "--start", type=TIME, help="Only intervals from this time.")
@click.option("-e", "--end", type=TIME, help="Only intervals up to this time.")
@click.option("--execution-time", type=TIME, help="The 'now' deciding which intervals are due.")
@click.option("--ignore-cron", is_flag=True, help="Process every missing interval, due or not.")
@selector_option("--select-model", help="Only the selected models of the environment, and everything upstream of "
                 "them (see --no-auto-upstream).")
@click.option("--no-auto-upstream", is_flag=True,
              help="With --select-model: only the selected models, not what they read from.")
@click.pass_context
def run(ctx, environment, start, end, execution_time, ignore_cron, select_model, no_auto_upstream) -> None:
    """Process the missing intervals whose cron is due, for ENVIRONMENT's models."""
    if no_auto_upstream and not select_model:
        raise MeshError("--no-auto-upstream only applies with --select-model")
    context = project_context(ctx)
    options = {"start": start, "end": end, "select": select_model or None, "auto_upstream": not no_auto_upstream}
    context.runs.check(environment, **options)  # a refused run starts no server
    context.start_spark_early()  # its JVM starts while the intervals are found
    from mesh_dagster.cli.progress import ConsoleListener  # Context's listener: for commands that apply or run

    listener = ConsoleListener()
    try:
        context.runs.run(environment, listener=listener, execution_time=execution_time, ignore_cron=ignore_cron,
                         **options)
    finally:
        listener.close()


@cli.command()
@click.argument("sql")
@click.pass_context
def fetchdf(ctx, sql) -> None:
    """Run SQL on Spark and print the result."""
    import pandas as pd

    df = project_context(ctx).engine.session.fetchdf(sql)
    with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
        click.echo(df.to_string() if not df.empty else f"Empty result. Columns: {', '.join(df.columns)}")


@cli.command()
@click.argument("model")
@click.option("-s", "--start", type=TIME, help="Start of the interval to render (default: the last complete one).")
@click.option("-e", "--end", type=TIME, help="End of the interval to render, inclusive for dates.")
@click.option("--execution-time", type=TIME, help="The 'now' of @execution_* macros.")
@click.option("--no-format", is_flag=True, help="Print on one line.")
@click.pass_context
def render(ctx, model, start, end, execution_time, no_format) -> None:
    """Print MODEL's query as it would run (macros expanded, physical tables); a Python model has none."""
    click.echo(project_context(ctx).inspection.render(model, start, end, execution_time, pretty=not no_format))


@cli.command()
@click.argument("model")
@click.option("-s", "--start", type=TIME, help="Start of the interval to evaluate (default: the last complete one).")
@click.option("-e", "--end", type=TIME, help="End of the interval to evaluate, inclusive for dates.")
@click.option("--execution-time", type=TIME, help="The 'now' of @execution_* macros.")
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(min=0), help="Rows to show at most.")
@click.pass_context
def evaluate(ctx, model, start, end, execution_time, limit) -> None:
    """Run MODEL's query (a Python model's function) and print rows, writing nothing."""
    df = project_context(ctx).inspection.evaluate(model, start, end, execution_time, limit)
    click.echo(df.to_string())


@cli.command()
@click.argument("environment", type=ENVIRONMENT)
@click.pass_context
def diff(ctx, environment) -> None:
    """Show the differences between the project and ENVIRONMENT."""
    show_plan(project_context(ctx).plans.plan(environment, allow_empty=True))


@cli.command("table_diff")
@click.argument("source_target")
@click.argument("model", required=False)
@click.option("-o", "--on", multiple=True, help="Join columns (default: each model's grain).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0), help="Rows of differences to show.")
@selector_option("-m", "--select-model", help="Diff every selected model that the two environments hold in "
                 "different tables (with MODEL, if given, too).")
@click.pass_context
def table_diff(ctx, source_target, model, on, limit, select_model) -> None:
    """Compare models' data between two environments: `mesh table_diff prod:dev my.model` or
    `mesh table_diff prod:dev -m 'my.*'`."""
    if ":" not in source_target:
        raise MeshError("Write the environments as SOURCE:TARGET, e.g. prod:dev")
    if model is None and not select_model:
        raise MeshError("Name the MODEL to diff, or select models with -m/--select-model")
    source, target = (environment_name(e) for e in source_target.split(":", 1))
    context = project_context(ctx)
    if not select_model:
        _show_table_diff(context.inspection.table_diff(source, target, model, list(on) or None, limit), source, target)
        return
    selectors = [*select_model, *([model] if model else [])]
    result = context.inspection.table_diffs(source, target, selectors, list(on) or None, limit)
    for i, d in enumerate(result.diffs):
        if i:
            click.echo()
        _show_table_diff(d, source, target)
    if result.skipped:
        click.echo(("\n" if result.diffs else "") + "Not diffed:")
        for name, reason in result.skipped.items():
            click.echo(f"  {name}: {reason}")


def _show_table_diff(d, source: str, target: str) -> None:
    click.echo(f"Table diff {d.source} -> {d.target} on {', '.join(d.on)}")
    if d.schema_added or d.schema_removed:
        click.echo(f"Schema: added {d.schema_added or '-'}, removed {d.schema_removed or '-'}")
    click.echo(f"Rows: {d.source} {d.source_count}, {d.target} {d.target_count}")
    click.echo(f"  only in {source}: {d.source_only}\n  only in {target}: {d.target_only}\n  matched: {d.joined}")
    if d.column_mismatches:
        click.echo("Columns with different values in matched rows:")
        for col, n in d.column_mismatches.items():
            click.echo(f"  {col}: {n}")
    if d.sample is not None and not d.sample.empty:
        click.echo("Sample of differing rows:\n" + d.sample.to_string())


@cli.command()
@click.argument("environment", type=ENVIRONMENT)
@click.option("-s", "--sync", is_flag=True, help="Delete the environment now instead of at the next janitor run.")
@click.pass_context
def invalidate(ctx, environment, sync) -> None:
    """Mark ENVIRONMENT expired so the janitor removes it."""
    project_context(ctx).upkeep.invalidate(environment, sync)
    click.echo(f"Environment '{environment}' invalidated." + (" Deleted." if sync else ""))


@cli.command()
@click.option("--ignore-ttl", is_flag=True, help="Delete unreferenced snapshots now, whatever their age.")
@click.pass_context
def janitor(ctx, ignore_ttl) -> None:
    """Delete expired environments and the physical tables no environment references."""
    result = project_context(ctx).upkeep.janitor(ignore_ttl)
    click.echo(f"Removed {len(result['environments'])} environment(s) and {len(result['tables'])} table(s).")
    for t in result["tables"]:
        click.echo(f"  dropped {t}")


@cli.command()
@click.argument("tests", nargs=-1)
@click.option("-k", "pattern", help="Only tests whose name matches.")
@click.pass_context
def test(ctx, tests, pattern) -> None:
    """Run the project's YAML unit tests on Spark."""
    report = project_context(ctx).test(list(tests) or None, pattern)
    show_test_report(report)
    if not report.ok:
        sys.exit(EXIT_ERROR)


@cli.command()
@click.option("--model", "models", multiple=True, help="Only these models.")
@click.option("--environment", default="prod", show_default=True, type=ENVIRONMENT)
@click.pass_context
def audit(ctx, models, environment) -> None:
    """Run the models' audits on the data they currently hold."""
    results = project_context(ctx).inspection.audit(list(models) or None, environment)
    failed = 0
    for model, name, count, blocking in results:
        ok = count == 0
        failed += (not ok) and blocking
        click.echo(f"{'PASS' if ok else 'FAIL'} {model}: {name}" + ("" if ok else f" ({count} rows)"))
    click.echo(f"{len(results)} audits, {sum(1 for r in results if r[2] == 0)} passed")
    if failed:
        sys.exit(EXIT_ERROR)


INFO_LIMIT = 2000  # characters of one `mesh info` line: a huge setting is cut, saying how much is left out


@cli.command()
@click.pass_context
def info(ctx) -> None:
    """Show the project's models, audits, tests and connections."""
    data = project_context(ctx).inspection.info()  # secrets already hidden
    for key, value in data.items():
        click.echo(f"{key}: {shorten(printable_line(str(value)), INFO_LIMIT)}")


@cli.command()
@click.pass_context
def environments(ctx) -> None:
    """List environments and when they expire."""
    for env in project_context(ctx).state.environments.get_environments():
        expiry = ms_to_datetime(env.expiration_ts).strftime("%Y-%m-%d %H:%M") if env.expiration_ts else "never"
        click.echo(f"{env.name:<20} {len(env.snapshots):>5} models   expires {expiry}")


@cli.command("table_name")
@click.argument("model")
@click.pass_context
def table_name(ctx, model) -> None:
    """Print the physical table of MODEL's current version."""
    click.echo(project_context(ctx).inspection.physical_table(model))


@cli.command("create_external_models")
@click.option("--strict", is_flag=True, help="Fail, writing nothing, when a table is missing from the catalog.")
@click.pass_context
def create_external_models(ctx, strict) -> None:
    """Write external_models.yaml: every table the models read that mesh does not build, with its
    columns from Spark's catalog.

    Entries already in the file keep their order and their other keys (description, dialect);
    their columns are refreshed. Tables missing from the catalog are written without columns
    (with --strict: nothing is written). Comments in the file are not kept.
    """
    result = project_context(ctx).inspection.create_external_models(strict)
    if not result.written:
        click.echo("The models read no external tables: nothing to write.")
        return
    click.echo(f"Wrote {len(result.written)} external model(s) to {result.shown}, "
               f"{len(result.with_columns)} with columns from the catalog.")
    warn = f"{click.style('Warning:', fg='yellow')}"
    if result.missing:
        click.echo(f"{warn} not found in the catalog, written without columns: {', '.join(result.missing)}", err=True)
    for table, reason in result.unsupported.items():
        click.echo(f"{warn} {table}: columns not written: {reason}", err=True)


@cli.command()
@click.pass_context
def migrate(ctx) -> None:
    """Migrate the state store's schema to this version of mesh_dagster."""
    click.echo(f"State store is up to date (schema v{project_context(ctx).upkeep.migrate()}).")


@cli.command()
@click.option(
    "-e",
    "--environment",
    "environments",
    multiple=True,
    type=ENVIRONMENT,
    help="Environment to serve as a code location (repeatable). Default: prod and $MESH_DEV_ENVIRONMENT (dev).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the webserver listens on.")
@click.option("--port", default=3000, show_default=True, type=click.IntRange(1, 65535), help="Port of the webserver.")
@click.pass_context
def ui(ctx, environments, host, port) -> None:
    """Start the Dagster UI (webserver + daemon) for this project: models as assets, backfills, promote jobs."""
    from mesh_dagster.dagster.ui.lock import check_ui_free
    from mesh_dagster.dagster.ui.workspace import (
        check_instance_database,
        dagster_dev_command,
        dagster_env,
        dev_environment,
        ui_home,
        write_workspace,
    )

    context = project_context(ctx)
    context.project  # noqa: B018  # a broken project fails here, with its file and line
    storage = context.config.dagster.storage
    check_instance_database(storage, ui_home(context.path))  # before any file is written
    check_ui_free(ui_home(context.path))
    workspace = write_workspace(context.path, list(environments) or ["prod", dev_environment()], storage,
                                context.repos)
    where = "SQLite in .mesh/dagster" if storage.type == "sqlite" else \
        f"Postgres {storage.host}:{storage.port}/{storage.database}"
    click.echo(f"Dagster UI on http://{host}:{port} (workspace {workspace}, instance on {where}); Ctrl-C stops it.")
    command = dagster_dev_command(workspace, host, port)
    sys.stdout.flush()
    # the supervisor (ui_supervisor) gets Ctrl-C/SIGTERM
    os.execve(command[0], command, dagster_env(workspace, storage))


from mesh_dagster.cli.git_worker import git_worker  # noqa: E402
from mesh_dagster.cli.lineage import lineage  # noqa: E402
from mesh_dagster.cli.lint import lint  # noqa: E402
from mesh_dagster.cli.plans import plans  # noqa: E402
from mesh_dagster.cli.spark_commands import spark  # noqa: E402

cli.add_command(spark)
cli.add_command(plans)
cli.add_command(lint)
cli.add_command(lineage)
cli.add_command(git_worker)


def main() -> None:
    cli(obj={})


if __name__ == "__main__":
    main()
