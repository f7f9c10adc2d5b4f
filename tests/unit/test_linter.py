"""The linter (`linter:` in the config), with SQLMesh's documented behaviour as the expectation:
off unless `enabled`; violations of `rules` are errors that stop `plan` (listed as
`file:line: rule: message`), of `warn_rules` warnings; `ignored_rules` and `ALL`; a model's
`ignored_rules`; user rules are the `Rule` subclasses of `linter/*.py` (`check_model` returning
`self.violation()` or None); `mesh plan --skip-linter` skips it and `mesh lint` runs it alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from project_builder import CONFIG, write_project

from mesh_dagster.cli.main import cli
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.project.linter import LintReport, lint
from mesh_dagster.core.project.project import load_project

PARENT = "MODEL (name s.p, kind FULL, owner 'jen', audits (not_null(columns := (id))));\nSELECT 1 AS id, 2 AS x\n"
OTHER = "MODEL (name s.q, kind FULL, owner 'jen', audits (not_null(columns := (id))));\nSELECT 1 AS id, 3 AS y\n"
CLEAN = "MODEL (name s.m, kind FULL, owner 'jen', audits (not_null(columns := (id))));\nSELECT p.id, p.x FROM s.p AS p\n"


def _linter(rules: str, warn: str = "[]", ignored: str = "[]") -> str:
    return CONFIG + f"linter:\n  enabled: true\n  rules: {rules}\n  warn_rules: {warn}\n  ignored_rules: {ignored}\n"


def _lint(tmp_path: Path, model: str, config: str, files: dict[str, str] | None = None) -> LintReport:
    root = write_project(tmp_path / f"p{len(list(tmp_path.iterdir()))}",
                         {"models/p.sql": PARENT, "models/q.sql": OTHER, "models/m.sql": model, **(files or {})},
                         config)
    return lint(load_project(root, use_cache=False))


def _found(report: LintReport) -> list[str]:
    return [str(f) for f in report.findings]


BUILT_IN = {  # rule -> (a model breaking it, the line reported, a fragment of the message)
    "noselectstar": ("MODEL (name s.m, kind FULL, owner 'jen', audits (not_null(columns := (id))));\n"
                     "SELECT * FROM s.p\n", 2, "SELECT *"),
    "invalidselectstarexpansion": ("MODEL (name s.m, kind FULL, owner 'jen', audits (not_null(columns := (id))));\n"
                                   "SELECT * FROM raw.events\n", 2, "columns of raw.events are unknown"),
    "ambiguousorinvalidcolumn": ("MODEL (name s.m, kind FULL, owner 'jen', audits (not_null(columns := (id))));\n"
                                 "SELECT id FROM s.p JOIN s.q ON p.id = q.id\n", 2, "Column 'id' could not be resolved"),
    "nomissingaudits": ("MODEL (name s.m, kind FULL, owner 'jen');\nSELECT p.id FROM s.p AS p\n", 1, "audits"),
    "nomissingowner": ("MODEL (name s.m, kind FULL, audits (not_null(columns := (id))));\nSELECT p.id FROM s.p AS p\n",
                       1, "owner"),
    "nomissingexternalmodels": ("MODEL (name s.m, kind FULL, owner 'jen', audits (not_null(columns := (id))));\n"
                                "SELECT e.id FROM raw.events AS e\n", 1, "raw.events not declared"),
}


@pytest.mark.parametrize("rule", sorted(BUILT_IN))
def test_built_in_rule(tmp_path: Path, rule: str) -> None:
    model, line, fragment = BUILT_IN[rule]
    found = _lint(tmp_path, model, _linter(f"[{rule}]")).findings
    assert [(f.rule, f.model, f.path, f.line, f.error) for f in found] == [(rule, "s.m", "models/m.sql", line, True)]
    assert fragment in found[0].message
    assert _lint(tmp_path, CLEAN, _linter(f"[{rule}]")).findings == []


def test_the_linter_is_off_unless_enabled(tmp_path: Path) -> None:
    broken = {"linter/rules.py": "raise RuntimeError('never imported')\n"}
    report = _lint(tmp_path, BUILT_IN["noselectstar"][0], CONFIG + "linter:\n  rules: ALL\n", broken)
    assert not report.enabled and report.findings == []


def test_warn_rules_warn_and_all_takes_every_other_rule(tmp_path: Path) -> None:
    model = "MODEL (name s.m, kind FULL);\nSELECT * FROM s.p\n"
    report = _lint(tmp_path, model, _linter("[noselectstar]", warn="ALL"))
    assert [(f.rule, f.error) for f in report.findings] == [
        ("nomissingaudits", False), ("nomissingowner", False), ("noselectstar", True)]
    assert not report.ok
    report = _lint(tmp_path, model, _linter("ALL", ignored="[noselectstar, nomissingaudits]"))
    assert [(f.rule, f.error) for f in report.findings] == [("nomissingowner", True)]
    report = _lint(tmp_path, model, _linter("[]", warn="[noselectstar]"))
    assert report.ok and _found(report) == ["models/m.sql:2: noselectstar: Query should not contain SELECT * on its "
                                            "outer most projections, even if it can be expanded."]


def test_a_model_s_ignored_rules(tmp_path: Path) -> None:
    model = "MODEL (\n  name s.m,\n  kind FULL,\n  ignored_rules [\"noselectstar\"]\n);\nSELECT * FROM s.p\n"
    assert _lint(tmp_path, model, _linter("[noselectstar, nomissingowner]"))
    assert [f.rule for f in _lint(tmp_path, model, _linter("[noselectstar, nomissingowner]")).findings] == [
        "nomissingowner"]
    everything = model.replace('["noselectstar"]', "ALL")
    assert _lint(tmp_path, everything, _linter("ALL")).findings == []


def test_rule_names_are_checked_at_their_line(tmp_path: Path) -> None:
    with pytest.raises(MeshError) as e:
        _lint(tmp_path, CLEAN, _linter("[noselectstar, noselectstra]"))
    assert "config.yaml:7: linter.rules: unknown rule 'noselectstra' (built in: ambiguousorinvalidcolumn" in str(e.value)
    with pytest.raises(MeshError) as e:
        _lint(tmp_path, CLEAN, _linter("[nomissingunittest]"))
    assert "'nomissingunittest' is not available in mesh_dagster" in str(e.value)
    with pytest.raises(MeshError) as e:  # mutually exclusive lists, as in SQLMesh
        _lint(tmp_path, CLEAN, _linter("[noselectstar]", ignored="[noselectstar]"))
    assert "config.yaml:9: linter.ignored_rules.0: 'noselectstar' is also in linter.rules" in str(e.value)


USER_RULE = '''import typing as t

from sqlmesh.core.linter.rule import Rule, RuleViolation
from sqlmesh.core.model import Model, ModelKindName


class NoFullTablesWithoutDescription(Rule):
    """FULL models need a description."""

    def check_model(self, model: Model) -> t.Optional[RuleViolation]:
        if model.kind.name != ModelKindName.FULL or model.description:
            return None
        columns = ", ".join(model.columns_to_types or {})
        projections = len(model.render_query().expressions)
        return self.violation(f"{model.name} ({columns}; {projections} projections) has no description")
'''


def test_a_user_rule_in_linter_folder(tmp_path: Path) -> None:
    files = {"linter/user.py": USER_RULE}
    report = _lint(tmp_path, CLEAN, _linter("[nofulltableswithoutdescription]"), files)
    assert _found(report) == [f"models/{n}.sql:1: nofulltableswithoutdescription: s.{n} (id, {c}; 2 projections) "
                              f"has no description" for n, c in (("m", "x"), ("p", "x"), ("q", "y"))]
    described = CLEAN.replace("owner 'jen'", "owner 'jen', description 'ok'")
    assert len(_lint(tmp_path, described, _linter("ALL", ignored="[nomissingaudits]"), files).findings) == 2


def test_a_user_rule_that_fails_is_reported_at_its_line(tmp_path: Path) -> None:
    raising = USER_RULE.replace("        columns =", "        1 / 0\n        columns =")
    with pytest.raises(MeshError) as e:
        _lint(tmp_path, CLEAN, _linter("ALL"), {"linter/user.py": raising})
    assert "linter/user.py:7: Linter rule nofulltableswithoutdescription failed on model s.m: ZeroDivisionError" \
        in str(e.value)
    wrong = USER_RULE.replace("return self.violation(", "return (")
    with pytest.raises(MeshError) as e:
        _lint(tmp_path, CLEAN, _linter("ALL"), {"linter/user.py": wrong})
    assert "returned str, not a RuleViolation or None" in str(e.value)
    clash = USER_RULE.replace("NoFullTablesWithoutDescription", "NoSelectStar")
    with pytest.raises(MeshError) as e:
        _lint(tmp_path, CLEAN, _linter("ALL"), {"linter/user.py": clash})
    assert "linter/user.py:7: Linter rule NoSelectStar has the name of a built-in rule" in str(e.value)


def _mesh(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args])


def test_a_violation_blocks_mesh_plan_and_skip_linter_lets_it_through(tmp_path: Path) -> None:
    star = "MODEL (name s.m, kind FULL);\nSELECT * FROM s.p\n"
    root = write_project(tmp_path / "p", {"models/p.sql": PARENT, "models/m.sql": star},
                         _linter("[noselectstar]", warn="[nomissingowner]"))
    refused = _mesh(root, "plan", "--no-prompts", "--skip-tests")
    assert refused.exit_code != 0
    assert "Linter warning: models/m.sql:1: nomissingowner: Model owner should always be specified." in refused.output
    assert "Linter errors: models/m.sql:2: noselectstar: Query should not contain SELECT *" in refused.output
    assert "--skip-linter" in refused.output and "Nothing was planned" in refused.output
    assert not (root / ".mesh" / "state.db").exists()  # nothing planned, nothing recorded
    alone = _mesh(root, "lint")
    assert alone.exit_code != 0 and "Linter error: models/m.sql:2: noselectstar" in alone.output
    assert _mesh(root, "lint", "--model", "s.p").exit_code == 0
    skipped = _mesh(root, "plan", "--explain", "--skip-linter", "--skip-tests")
    assert skipped.exit_code == 0, skipped.output
    assert "Linter" not in skipped.output and "s.m" in skipped.output


def test_columns_of_tables_whose_columns_are_unknown_are_not_judged(tmp_path: Path) -> None:
    """A self-referencing model reads its own table, an undeclared table has unknown columns, a CTE is
    no table: none of them is an invalid column."""
    own = ("MODEL (name s.m, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id), owner 'jen', audits (not_null("
           "columns := (id))));\nWITH c AS (SELECT p.id FROM s.p AS p)\n"
           "SELECT c.id, CAST(COALESCE(m.n, 0) + 1 AS INT) AS n FROM c LEFT JOIN s.m AS m ON m.id = c.id\n")
    assert _lint(tmp_path, own, _linter("[ambiguousorinvalidcolumn]")).findings == []
    undeclared = "MODEL (name s.m, kind FULL);\nSELECT e.id, x FROM raw.events AS e JOIN s.p AS p ON e.id = p.id\n"
    assert _lint(tmp_path, undeclared, _linter("[ambiguousorinvalidcolumn]")).findings == []
