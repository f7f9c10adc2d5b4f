"""How the CLI shows plans and progress (format only: no logic lives here).

Everything shown holds user text (model names, diffs of model files, test messages): it goes
through `printable`, so an escape sequence in a model is shown to the reviewer, never obeyed by
their terminal (core/config/display.py), and through `escape` where rich would read it as markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions
from rich.markup import escape
from rich.segment import Segment

from mesh_dagster.core.config.display import printable

if TYPE_CHECKING:  # types only: `mesh --help` loads this module, and must load nothing of Context's
    from mesh_dagster.context import MissingTable, PlanExplanation
    from mesh_dagster.core.plan.plan import Plan


def _console() -> Console:
    probe = Console()
    # Piped output (CI logs, tests) must not be cropped at rich's default 80 columns.
    width = None if probe.is_terminal else 250
    return Console(highlight=False, soft_wrap=True, width=width)


console = _console()


class Tree:
    """A plain-text tree drawn with the same guides as rich's, but fast for thousands of lines
    (rich's Tree takes seconds on a 1,000-model plan) and never reading labels as markup."""

    def __init__(self, label: str):
        self.label = label
        self.children: list[Tree] = []

    def add(self, label: str) -> Tree:
        node = Tree(label)
        self.children.append(node)
        return node

    def lines(self) -> list[str]:
        out = [self.label]
        self._child_lines(out, "")
        return out

    def _child_lines(self, out: list[str], prefix: str) -> None:
        for i, child in enumerate(self.children):
            last = i == len(self.children) - 1
            out.append(f"{prefix}{'└── ' if last else '├── '}{child.label}")
            child._child_lines(out, prefix + ("    " if last else "│   "))

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _tree(title: str) -> Tree:
    return Tree(title)


class _Plain:
    """Text that rich writes as it is. `console.out` makes a `Text` of every line to wrap and
    justify it, which a soft-wrapped console without styles then leaves unchanged: 0.2 s of
    CPU for the 17,000 lines of a 1,000-model `plan --explain`. Going through `console.print`
    (not the file) keeps rich's capture, recording and live displays working."""

    def __init__(self, text: str):
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        yield Segment(self.text)
        yield Segment.line()


def print_tree(tree: Tree) -> None:
    text = printable(str(tree))
    if "\t" in text:  # rich expands tabs to its tab stops: leave it to rich
        console.out(text, highlight=False)
    else:
        console.print(_Plain(text), crop=False, soft_wrap=True)


def show_test_report(report, engine_name: str = "spark") -> None:
    console.print("=" * 70)
    if report.ok:
        console.print(f"Successfully Ran {report.total} tests against {engine_name} in {report.seconds:.1f} seconds.")
    else:
        for r in report.results:
            if not r.passed:
                console.print(f"[red]FAIL[/red] {escape(printable(f'{r.name} ({r.path})'))}")
                console.out(printable(str(r.message)), highlight=False)
        console.print(
            f"Ran {report.total} tests against {engine_name}: {report.failed} failed, {report.passed} passed."
        )
    console.print("-" * 70)


def show_plan(plan: Plan, no_diff: bool = False) -> None:
    env = plan.environment
    if plan.is_new_environment and plan.is_prod:
        console.print("\n`prod` environment will be initialized\n")
    elif plan.is_new_environment:
        console.print(f"\nNew environment `{env}` will be created from `{plan.create_from or 'prod'}`\n")
    if plan.finishes_interrupted_apply:
        console.print(f"\nThe last apply to `{env}` stopped before all its views moved: applying completes them\n")
    if plan.restated:
        tree = _tree("Restating models:")
        for name in plan.restated:
            tree.add(plan.view(name))
        print_tree(tree)
    elif not plan.has_changes:
        if not plan.is_new_environment:
            console.print(f"\nNo changes to plan: project files match the `{env}` environment\n")
    else:
        if not (plan.is_new_environment and plan.is_prod):
            console.print(f"\nDifferences from the `{plan.create_from or env}` environment:\n")
        if plan.changed or plan.removed:
            _show_models(plan)
        if not no_diff:
            _show_directly_modified(plan)
        _show_statements(plan)
    if plan.backfills and not plan.skip_backfill:
        tree = _tree("Models needing backfill:")
        for name, bf in plan.backfills.items():
            unit = plan.snapshots[name].model.interval_unit
            preview = " (preview)" if name in plan.previews else ""
            took = plan.estimate.suffix(name) if plan.estimate is not None else ""
            tree.add(f"{plan.view(name)}: {bf.describe(unit)}{preview}{took}")
        print_tree(tree)
        if plan.estimate is not None and plan.estimate.known:
            console.print(plan.estimate.line())
    _show_schema_changes(plan)


def show_missing_tables(plan: Plan, missing: list[MissingTable]) -> None:
    """Tables the plan's environment serves that are gone while their history is recorded."""
    if missing:
        tree = _tree("Missing physical tables:")
        for table in missing:
            tree.add(table.rebuilt(plan.view(table.snapshot.name)))
        print_tree(tree)


def show_warning(message: str) -> None:
    console.print(f"[yellow]Warning:[/yellow] {escape(printable(message))}")


def _show_schema_changes(plan: Plan) -> None:
    """What forward-only changes do to the tables they keep, and what their policies only warn of."""
    if plan.schema_changes:
        tree = _tree("Schema changes of kept tables:")
        for name, change in plan.schema_changes.items():
            what = "; ".join(t for t in (change.diff.describe_additive(), change.diff.describe_destructive()) if t)
            tree.add(f"{plan.view(name)}: {what}")
        print_tree(tree)
    for warning in plan.warnings:
        show_warning(warning)


def _show_models(plan: Plan) -> None:
    tree = _tree("Models:")
    sections = [
        ("Added", plan.added),
        ("Removed", [r.name for r in plan.removed]),
        ("Directly Modified", plan.directly_modified),
        ("Indirectly Modified", sorted({c for cs in plan.indirectly_modified.values() for c in cs})),
        ("Metadata Updated", plan.metadata_updated),
    ]
    for title, names in sections:
        if names:
            branch = tree.add(f"{title}:")
            for name in sorted(names):
                audit = name in plan.snapshots and plan.snapshots[name].model.kind.is_standalone_audit
                branch.add(plan.view(name) + (" (standalone audit)" if audit else ""))
    print_tree(tree)


def show_diff(plan: Plan, name: str) -> None:
    """A changed model's text diff, coloured."""
    _print_diff(plan.diffs.get(name, ""))


def _show_statements(plan: Plan) -> None:
    """A change of the environment's `before_all` / `after_all`: every line of what will run, the changes marked."""
    if plan.statements_changed:
        console.print("Environment statements (before_all / after_all) changed:")
        _print_diff(plan.statements.diff(plan.base_statements))


def _print_diff(diff: str) -> None:
    if diff:
        console.print()
        from rich.syntax import Syntax  # deliberately lazy: pygments costs every command ~0.1 s, diffs are rare

        console.print(Syntax(printable(diff), "diff", theme="ansi_dark", background_color="default"))
        console.print()


def _show_directly_modified(plan: Plan) -> None:
    for name in [*plan.directly_modified, *plan.metadata_updated]:
        show_diff(plan, name)
    for name in plan.directly_modified:
        category = plan.category(name)
        tree = _tree(f"Directly Modified: {plan.view(name)} ({category.label if category else 'Uncategorized'})")
        children = plan.indirectly_modified.get(name, [])
        if children:
            branch = tree.add("Indirectly Modified Children:")
            for child in sorted(children):
                c = plan.category(child)
                branch.add(f"{plan.view(child)} ({c.label if c else 'Uncategorized'})")
        print_tree(tree)


def show_explain(plan: Plan, explanation: PlanExplanation) -> None:
    tree = _tree("Explained plan")
    if explanation.creating:
        branch = tree.add("Validate SQL and create physical layer tables and views if they do not exist")
        for snap in explanation.creating:
            node = branch.add(f"{snap.name} -> {snap.table_name}")
            if snap.model.kind.is_view:
                node.add("Create view if it doesn't exist")
            else:
                if snap.model.query:
                    node.add("Dry run model query without inserting results")
                node.add("Create table if it doesn't exist")
    if plan.backfills and not plan.skip_backfill:
        branch = tree.add("Backfill models by running their queries and run standalone audits")
        for name, bf in plan.backfills.items():
            snap = plan.snapshots[name]
            if snap.model.kind.is_symbolic:  # audits only: a standalone audit, an external model's audits
                node = branch.add(name)
                what = "standalone audit" if snap.model.kind.is_standalone_audit else "audit"
                for audit in snap.model.audits:
                    node.add(f"Run {what} '{audit.name}' for {bf.describe(snap.model.interval_unit)[1:-1]}")
                continue
            node = branch.add(f"{name} -> {snap.table_name}")
            step = snap.model.kind.build_step(bf.full_refresh)
            if step is not None:
                node.add(step)
            else:
                unit = snap.model.interval_unit
                node.add(f"Insert {bf.describe(unit)[1:-1]}"
                         + (f" in batches of {snap.model.batch_size}" if snap.model.batch_size else ""))
            for audit in snap.model.audits:
                node.add(f"Run '{audit.name}' audit")
    promote, demote = explanation.promote, explanation.demote
    console.print()
    if promote or demote:
        branch = tree.add(f"Update the virtual layer for environment '{plan.environment}'")
        if promote:
            sub = branch.add("Create or update views in the virtual layer to point at new physical tables and views")
            for snap in promote:
                sub.add(f"{plan.view(snap.name)} -> {snap.table_name}")
        if demote:
            sub = branch.add("Delete views in the virtual layer for models that were removed")
            for name in demote:
                sub.add(plan.view(name))
    print_tree(tree)
    fingerprints = _tree("Snapshot fingerprints (Dagster code versions):")
    for name, snap in plan.snapshots.items():
        fingerprints.add(f"{plan.view(name)}: {snap.identifier} (version {snap.version})")
    console.print()
    print_tree(fingerprints)
