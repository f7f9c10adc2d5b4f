"""Python module globals computed at import (issue 34, point 2): a global whose assignment reads the
environment, a file or the clock is stored with the plan as the value it had then (when plain data),
so the plan shows its change and every evaluation uses the planned value; one that is not plain
data is named in the plan's warnings; every other global stays code, and keeps its fingerprint."""

from __future__ import annotations

import datetime
import decimal
import json
import zoneinfo
from pathlib import Path

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.models.import_time import plain_text
from mesh_dagster.core.plan.plan import Plan, build_plan
from mesh_dagster.core.project.project import load_project
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.sql.renderer import RenderContext, render_sql

WHEN = "2020-01-05"
RATE_VARIABLE = "MESH_TEST_IMPORT_RATE"
PARSER_VARIABLE = "MESH_TEST_IMPORT_PATTERN"
# Line numbers matter: the tests below point at them.
MODEL = f'''\
import os

import pandas as pd

from mesh_dagster import model

RATE = int(os.environ.get("{RATE_VARIABLE}", "1"))


@model("s.m", columns={{"v": "int"}})
def execute(context, start, end, execution_time):
    return pd.DataFrame({{"v": [RATE * 10]}})
'''
RATE_LINE = 7
LOOKUP = f'''\
import json
import os
import re
from pathlib import Path

from mesh_dagster import macro

HERE = Path(__file__).parent
REGIONS = json.loads((HERE / "regions.json").read_text())
PARSER = re.compile(os.environ.get("{PARSER_VARIABLE}", "[a-z]+"))


@macro()
def region(evaluator, code):
    return "'" + REGIONS[code.name] + "'"


@macro()
def matches(evaluator, text):
    return "TRUE" if PARSER.fullmatch(text.name) else "FALSE"
'''
REGIONS_LINE, PARSER_LINE = 9, 10
FILES = {
    "models/m.py": MODEL,
    "macros/lookup.py": LOOKUP,
    "macros/regions.json": json.dumps({"eu": "Europe"}),
    "models/sales.sql": "MODEL (name s.sales, kind FULL);\nSELECT @region(eu) AS region\n",
    "models/codes.sql": "MODEL (name s.codes, kind FULL);\nSELECT @matches(abc) AS ok\n",
    "models/plain.sql": "MODEL (name s.plain, kind FULL);\nSELECT 1 AS x\n",
}


def project_at(tmp_path: Path, files: dict[str, str]) -> Path:
    """A project of `files`, written exactly (Python files are not dedented: their lines matter)."""
    root = write_project(tmp_path / "p", {})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def root(tmp_path, state, monkeypatch) -> Path:
    """The project applied to prod with the rate at 3 and `eu` meaning Europe."""
    monkeypatch.setenv(RATE_VARIABLE, "3")
    root = project_at(tmp_path, FILES)
    record_plan(build_plan(load_project(root), state, execution_time=WHEN), state)
    return root


def plan(root: Path, state, env: str = "dev") -> Plan:
    return build_plan(load_project(root), state, env, execution_time=WHEN)


def set_region(root: Path, name: str) -> None:
    (root / "macros" / "regions.json").write_text(json.dumps({"eu": name}))


def test_an_environment_variable_read_at_import_is_stored_as_its_value(root, state):
    code = plan(root, state, "prod").snapshots["s.m"].model.python
    assert code is not None
    piece = code.env["RATE"]
    assert piece.text == (f"RATE = 3  # as computed when the plan was made: int(os.environ.get('{RATE_VARIABLE}', "
                          "'1'))")
    assert (piece.path, piece.line) == ("models/m.py", RATE_LINE)  # where tracebacks and the plan point
    assert "os" not in code.env  # the expression does not run again: what it needed is not stored


def test_a_changed_environment_variable_is_a_planned_change(root, state, monkeypatch):
    assert plan(root, state, "prod").changed == []  # same value: nothing to plan
    monkeypatch.setenv(RATE_VARIABLE, "5")
    p = plan(root, state)
    assert p.directly_modified == ["s.m"] and p.category("s.m") == C.BREAKING and "s.m" in p.backfills
    assert "-RATE = 3  # as computed" in p.diffs["s.m"] and "+RATE = 5  # as computed" in p.diffs["s.m"]


def test_a_changed_file_read_by_a_macro_module_changes_the_models_using_it(root, state):
    set_region(root, "Elsewhere")
    p = plan(root, state)
    assert p.directly_modified == ["s.sales"] and p.category("s.sales") == C.BREAKING
    assert p.snapshots["s.sales"].rendered_query == "SELECT 'Elsewhere' AS region"
    captured = p.snapshots["s.sales"].capture
    assert captured is not None
    assert captured.macros["region"].env["REGIONS"].text == ("REGIONS = {'eu': 'Elsewhere'}  # as computed when the "
                                                             "plan was made: json.loads((HERE / 'regions.json')"
                                                             ".read_text())")


def test_evaluation_uses_the_planned_values_not_todays(root, state, monkeypatch):
    """The stored snapshots, read back from the state store after the variable and the file
    changed (and the file is gone), compute what was planned."""
    planned = plan(root, state, "prod").snapshots
    ids = [planned["s.m"].snapshot_id, planned["s.sales"].snapshot_id]
    monkeypatch.setenv(RATE_VARIABLE, "5")
    (root / "macros" / "regions.json").unlink()
    stored = state.snapshots.get_snapshots(ids)
    model = stored[planned["s.m"].snapshot_id].model
    assert model.python is not None
    assert model.python.function()(None, None, None, None).to_dict("list") == {"v": [30]}
    sales = stored[planned["s.sales"].snapshot_id]
    assert sales.capture is not None
    assert render_sql(sales.model, RenderContext(), sales.capture.macro_registry(root)) == \
        "SELECT 'Europe' AS region"


def test_a_value_that_is_not_plain_data_is_named_in_the_plan(root, state, monkeypatch):
    p = plan(root, state, "prod")
    expected = (f"macros/lookup.py:{PARSER_LINE}: PARSER (a Pattern) is computed when its file is imported and reads "
                "outside the code (os.environ), but is not plain data, so the plan cannot store its value: every "
                "evaluation of s.codes computes it again and may not get what was planned. Make it plain data "
                "(numbers, strings, dates, lists, dicts), or read the setting as a variable (context.var / @VAR), "
                "which the plan captures")
    assert p.warnings == [expected]  # one line, for the one value; none for HERE, REGIONS or RATE
    captured = p.snapshots["s.codes"].capture
    assert captured is not None and captured.macros["matches"].env["PARSER"].text == \
        f'PARSER = re.compile(os.environ.get("{PARSER_VARIABLE}", "[a-z]+"))'  # code, run again
    monkeypatch.setenv(PARSER_VARIABLE, "[0-9]+")
    assert plan(root, state, "prod").changed == []  # what the warning says: a change of it is not seen


# ---------------------------------------------------------------------------------------------
# What reads outside the code, and what does not


def captured_text(tmp_path: Path, prelude: str, name: str = "VALUE", extra: dict[str, str] | None = None) -> str:
    """The stored text of global `name` of a model file starting with `prelude`."""
    source = (f"{prelude}\nimport pandas as pd\nfrom mesh_dagster import model\n\n\n"
              f"@model('s.m', columns={{'v': 'string'}})\ndef execute(context):\n"
              f"    return pd.DataFrame({{'v': [str({name})]}})\n")
    root = project_at(tmp_path, {"models/m.py": source, **(extra or {})})
    code = load_project(root, use_cache=False).models["s.m"].python
    assert code is not None
    return code.env[name].text


@pytest.mark.parametrize("prelude", [
    "from os import getenv\nVALUE = getenv('MESH_TEST_IMPORT_VALUE')",
    "import os\nVALUE = os.environ['MESH_TEST_IMPORT_VALUE'].split(',')",
    "import os\n\n\ndef setting():\n    return os.environ['MESH_TEST_IMPORT_VALUE']\n\n\nVALUE = setting()",
    "import os\n\n\nclass Settings:\n    def __init__(self):\n        self.value = os.getenv('MESH_TEST_IMPORT_VALUE')"
    "\n\n\nVALUE = Settings().value",
    "import os\nimport re\nPATTERN = re.compile(os.environ['MESH_TEST_IMPORT_VALUE'])\nVALUE = PATTERN.pattern",
    "from mesh_user_macros.settings import VALUE",
])
def test_a_value_reading_the_environment_in_any_way_is_stored_as_its_value(tmp_path, monkeypatch, prelude):
    monkeypatch.setenv("MESH_TEST_IMPORT_VALUE", "a,b")
    settings = {"macros/settings.py": "import os\n\nVALUE = os.environ['MESH_TEST_IMPORT_VALUE']\n"}
    text = captured_text(tmp_path, prelude, extra=settings)
    assert text.split("  # as computed when the plan was made: ")[0] in ("VALUE = 'a,b'", "VALUE = ['a', 'b']"), text


@pytest.mark.parametrize("prelude, value", [
    ("import datetime\nVALUE = datetime.date.today()", "VALUE = __import__('datetime').date.fromisoformat("),
    ("from datetime import datetime\nVALUE = datetime.now().replace(microsecond=0)",
     "VALUE = __import__('datetime').datetime.fromisoformat("),
    ("import random\nVALUE = random.randint(1, 6)", "VALUE = "),
    ("from pathlib import Path\nVALUE = (Path(__file__).parent / 'data.txt').read_text().strip()",
     "VALUE = 'from the file'"),
    ("import json\nwith open(__import__('pathlib').Path(__file__).parent / 'data.json') as f:\n    pass\n"
     "VALUE = sorted({'x', 'y'})", None),
])
def test_the_clock_chance_and_files_are_outside_the_code(tmp_path, prelude, value):
    extra = {"models/data.txt": "from the file\n", "models/data.json": "{}"}
    text = captured_text(tmp_path, prelude, extra=extra)
    if value is None:  # computed from the code alone: stays code
        assert text == "VALUE = sorted({'x', 'y'})"
    else:
        assert text.startswith(value) and "# as computed when the plan was made: " in text, text


# Globals computed from the code alone (and literals): stored as written. Their fingerprints below
# were computed by mesh_dagster before import-time values were captured (3fabff4): they must not move.
DETERMINISTIC = """\
import logging
import re
from collections import namedtuple
from datetime import date
from decimal import Decimal
from pathlib import Path

import pandas as pd

from mesh_dagster import model
from mesh_user_macros.helpers import scale

HERE = Path(__file__).parent
LOG = logging.getLogger(__name__)
PATTERN = re.compile("[a-z]+")
BASE = ["a", "b"]
COLUMNS = [c.upper() for c in BASE]
LIMIT = 2 ** 10
START = date(2020, 1, 1)
PRICE = Decimal("1.50")
Pair = namedtuple("Pair", "left right")
PAIR = Pair(1, scale(2))
try:
    import no_such_module as optional
except ImportError:
    optional = None
KEYS = {"x": (1, 2.5, None, True, b"z")}


@model("s.m", columns={"v": "string"})
def execute(context, start, end, execution_time):
    LOG.info("running")
    text = f"{HERE.name}{PATTERN.pattern}{COLUMNS}{LIMIT}{START}{PRICE}{PAIR}{optional}{KEYS}"
    return pd.DataFrame({"v": [text]})
"""
HELPERS = """\
from mesh_dagster import macro

FACTOR = int("3")


def scale(value):
    return value * FACTOR


@macro()
def tag(evaluator):
    return f"'{scale(1)}'"
"""
GOLDEN = {"s.m": "3260085153", "s.t": "3756075175"}


def test_values_computed_from_the_code_alone_stay_code_and_keep_their_fingerprints(tmp_path, state):
    root = project_at(tmp_path, {"models/m.py": DETERMINISTIC, "macros/helpers.py": HELPERS,
                                 "models/t.sql": "MODEL (name s.t, kind FULL);\nSELECT @tag() AS t\n"})
    project = load_project(root, use_cache=False)
    snapshots = build_snapshots(project)
    assert {name: s.identifier for name, s in snapshots.items()} == GOLDEN
    code = snapshots["s.m"].model.python
    assert code is not None and code.uncaptured == []
    assert all("as computed when the plan was made" not in piece.text for piece in code.env.values())
    assert build_plan(project, state, execution_time=WHEN).warnings == []


# ---------------------------------------------------------------------------------------------
# Plain data, written back deterministically


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, float("inf"), "text 'quoted'", b"\x00bytes", 1 + 2j,
    [1, [2, (3,)]], (), ("one",), {"a": {"b": [None]}}, {"b", "a", "c"}, set(), frozenset({3, 1}), frozenset(),
    datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 1, 10, 30, 5, 123),
    datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    datetime.time(23, 59), datetime.timedelta(days=-1, seconds=5), decimal.Decimal("1.50"),
])
def test_plain_data_is_written_back_as_the_same_value(value):
    text = plain_text(value)
    assert text is not None
    again = eval(text, {"__builtins__": __builtins__})  # noqa: S307 - the text this module wrote
    assert again == value and type(again) is type(value)


def test_sets_are_written_in_order_whatever_the_hash_seed():
    assert plain_text({"b", "c", "a"}) == "{'a', 'b', 'c'}"
    assert plain_text({"k": frozenset({"y", "x"})}) == "{'k': frozenset({'x', 'y'})}"


@pytest.mark.parametrize("value", [
    object(), [object()], {"k": Path("/tmp")}, datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    type("MyInt", (int,), {})(3),
])
def test_what_is_not_plain_data_is_not_written(value):
    assert plain_text(value) is None


def test_a_container_holding_itself_is_not_plain_data():
    loop: list = []
    loop.append(loop)
    assert plain_text(loop) is None
