"""The linter: SQLMesh's `linter:` block run over a loaded project, before a plan (`mesh plan`)
or alone (`mesh lint`).

Off unless `linter.enabled`, as in SQLMesh. The rules are the built-in ones (core/project/
lint_rules.py) and the project's own: every subclass of `Rule` in `linter/*.py`. A violation of a
rule of `rules` is an error (the plan stops, each violation listed as `file:line: rule: message`),
of `warn_rules` a warning; `ignored_rules` are not run, and `ALL` in a list stands for every rule
not in another list. A model's own `ignored_rules` property names rules not run on it (`ALL`: none).
A rule name that is neither built in nor in `linter/` is refused at its line, so a typo never
turns a rule off in silence.

Linting decides no data: it is not part of any snapshot, and a change to the rules or to a model's
`ignored_rules` changes no plan. Every front door that makes a plan runs it first and stops on an
error in the same words (`refuse_errors`): `mesh plan`, and Dagster's plan, promote and restate jobs
and the plans of git pushes (on the pushed commit's files).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from sqlglot import exp

from mesh_dagster.core.config.config import ALL_RULES
from mesh_dagster.core.config.user_modules import UserPackage
from mesh_dagster.core.errors import ConfigError, MeshError, ModelError
from mesh_dagster.core.models.model import Model
from mesh_dagster.core.project.lint_rules import BUILTIN_RULES, NOT_BUILT_IN, LintModel, Rule, RuleViolation
from mesh_dagster.core.project.project import Project
from mesh_dagster.core.sql.renderer import RenderContext, render_query

LINTER_DIR = "linter"
_LISTS = ("rules", "warn_rules", "ignored_rules")
NOTHING_PLANNED = "Nothing was planned."


@dataclass(frozen=True)
class Finding:
    """One violation: the model's file and line, the rule, its message; an error or a warning."""

    rule: str
    model: str
    message: str
    path: str | None
    line: int | None
    error: bool

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: " if self.path and self.line else f"{self.path}: " if self.path else ""
        return f"{where}{self.rule}: {self.message}"


@dataclass
class LintReport:
    """What a lint found; `enabled` False: the project's linter is off and nothing ran."""

    enabled: bool
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.error]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.error]

    @property
    def ok(self) -> bool:
        return not self.errors


class LinterErrors(MeshError):
    """Violations of `linter.rules` stopped a plan before it was made. `report` holds every
    finding, warnings too, for the front door to show its own way."""

    def __init__(self, report: LintReport, skip: str | None, what: str):
        listed = "; ".join(str(f).rstrip(".") for f in report.errors)
        remedy = "move the rule to linter.warn_rules or the model's ignored_rules"
        remedy = f"Fix them, {remedy}, or use {skip}." if skip else f"Fix them, or {remedy}."
        super().__init__(f"Linter errors: {listed}. {remedy} {what}")
        self.report = report


def refuse_errors(report: LintReport, skip: str | None = None, what: str = NOTHING_PLANNED) -> LintReport:
    """The one gate every front door puts before a plan: `report` if it has no error (its warnings
    are the caller's to show), else LinterErrors listing each as `file:line: rule: message`.
    `skip`: how this front door skips the linter, if it can (the CLI's `--skip-linter`)."""
    if not report.ok:
        raise LinterErrors(report, skip, what)
    return report


def lint(project: Project, models: list[str] | None = None) -> LintReport:
    """Run the project's linter over its models (or the named ones), in file order."""
    settings = project.config.linter
    if not settings.enabled:
        return LintReport(False)
    known = {**BUILTIN_RULES, **load_user_rules(project.path / LINTER_DIR)}
    errors, warns = _selected(project, known)
    instances = {name: known[name](project) for name in sorted(errors | warns)}
    report = LintReport(True)
    names = models if models is not None else sorted(project.models, key=lambda n: _order(project.models[n]))
    for name in names:
        model = project.models[name]
        if model.kind.is_external:
            continue
        skipped = _ignored(model, known)
        if ALL_RULES in skipped:
            continue
        view = lint_model(project, name)
        for rule_name, rule in instances.items():
            if rule_name in skipped:
                continue
            found = _check(rule, view, known[rule_name])
            if found is not None:
                report.findings.append(Finding(rule_name, name, found.violation_msg, model.path,
                                               found.line or model.line, rule_name in errors))
    return report


def _order(model: Model) -> tuple[str, int]:
    return model.path or "", model.line


def _check(rule: Rule, model: LintModel, cls: type[Rule]) -> RuleViolation | None:
    """The rule's verdict; a user rule that raises is reported at its own file and line."""
    try:
        found = rule.check_model(model)
    except MeshError:
        raise
    except Exception as e:  # noqa: BLE001 - a user rule may raise anything
        path, line = _defined_at(cls)
        raise ModelError(f"Linter rule {rule.name} failed on model {model.name}: {type(e).__name__}: {e}",
                         path, line) from None
    if found is not None and not isinstance(found, RuleViolation):
        path, line = _defined_at(cls)
        raise ModelError(f"Linter rule {rule.name} returned {type(found).__name__}, not a RuleViolation or None "
                         f"(return self.violation(...))", path, line)
    return found


def _defined_at(cls: type) -> tuple[str | None, int | None]:
    try:
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None, None
    return (f"{LINTER_DIR}/{Path(file).name}" if file else None), line


def _selected(project: Project, known: dict[str, type[Rule]]) -> tuple[set[str], set[str]]:
    """The rules whose violations are errors, and those that are warnings."""
    settings = project.config.linter
    named: dict[str, set[str]] = {}
    for key in _LISTS:
        names = getattr(settings, key)
        for index, rule in enumerate(names):
            if rule != ALL_RULES and rule not in known:
                raise ConfigError(f"linter.{key}: {_unknown_rule(rule, known)}",
                                  *project.config.where(("linter", key, index)))
        named[key] = set(names)
    everything = set(known)
    explicit = {key: names - {ALL_RULES} for key, names in named.items()}
    ignored = everything if ALL_RULES in named["ignored_rules"] else explicit["ignored_rules"]
    errors = (everything - explicit["warn_rules"]) if ALL_RULES in named["rules"] else explicit["rules"]
    warns = (everything - explicit["rules"]) if ALL_RULES in named["warn_rules"] else explicit["warn_rules"]
    return errors - ignored, warns - ignored - errors


def _unknown_rule(rule: str, known: dict[str, type[Rule]]) -> str:
    if rule in NOT_BUILT_IN:
        return f"SQLMesh's rule '{rule}' {NOT_BUILT_IN[rule]}"
    return f"unknown rule '{rule}' (built in: {', '.join(sorted(BUILTIN_RULES))}; the project's own are " \
           f"Rule subclasses in {LINTER_DIR}/*.py)"


def _ignored(model: Model, known: dict[str, type[Rule]]) -> set[str]:
    """The model's `ignored_rules`; a name no rule has is refused at the property's line."""
    for rule in model.ignored_rules:
        if rule != ALL_RULES and rule not in known:
            raise ModelError(f"ignored_rules: {_unknown_rule(rule, known)}", model.path,
                             model.property_lines.get("ignored_rules", model.line))
    return set(model.ignored_rules)


def load_user_rules(folder: Path) -> dict[str, type[Rule]]:
    """The `Rule` subclasses defined in `folder/*.py`, by name; a name taken twice is refused."""
    package = UserPackage("mesh_user_linter", folder, "linter rules")
    found: dict[str, type[Rule]] = {}
    for module in package.import_all():
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__):
                continue
            name = value.__name__.lower()
            path, line = _defined_at(value)
            if name in BUILTIN_RULES:
                raise ModelError(f"Linter rule {value.__name__} has the name of a built-in rule: rename it", path, line)
            if name in found:
                raise ModelError(f"Linter rule {value.__name__} is defined twice (rule names ignore case)", path, line)
            found[name] = value
    return found


def lint_model(project: Project, name: str) -> LintModel:
    """What rules see of the model `name` (see `LintModel`)."""
    model = project.models[name]
    query = rendered = None
    if model.query is not None:
        repo = project.repo_of(name)
        ctx = RenderContext(variables=repo.variables, schemas=project.parent_schemas(name))
        rendered = render_query(model, ctx, repo.macros)
        try:  # as written: its macros rendered, but without the parents' columns no `*` is expanded
            query = render_query(model, RenderContext(variables=repo.variables), repo.macros)
        except MeshError:  # a macro that needs the parents' columns (@STAR)
            query = rendered
    columns = project.columns(name)
    return LintModel(
        name=name, kind=model.kind, dialect=model.dialect, owner=model.owner, description=model.description,
        tags=list(model.tags), audits=[(a.name, dict(a.args)) for a in model.audits],
        query=query, rendered=rendered,
        columns_to_types=None if columns is None else {c: _data_type(t) for c, t in columns.items()},
        depends_on=set(project.parents(name)), path=model.path, line=model.line, query_line=model.query_line,
        is_python=model.is_python, parent_columns={p: project.columns(p) for p in project.parents(name)},
        undeclared_tables=sorted(p for p in project.parents(name)
                                 if project.models[p].kind.is_external and project.models[p].path is None))


def _data_type(text: str | None) -> exp.DataType:
    if text:
        try:
            return exp.DataType.build(text, dialect="spark")
        except Exception:  # noqa: BLE001 - sqlglot's parse errors vary; the type is then unknown
            pass
    return exp.DataType.build("unknown")
