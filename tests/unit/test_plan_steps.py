"""Each step of `build_plan` on its own, and the promise they share: nothing given is modified.

The state store is a real SQLite one; prod is recorded as applied (no Spark) before each test.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest
from project_builder import record_plan, write_project

from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.changes import ChangeSet, categorize_changes
from mesh_dagster.core.plan.plan import (
    Base,
    build_plan,
    known_snapshots,
    plan_backfills,
    promoted_models,
    resolve_base,
    validate_range,
)
from mesh_dagster.core.project.project import Project, load_project
from mesh_dagster.core.snapshots.environment import Environment
from mesh_dagster.core.snapshots.fingerprint import build_snapshots
from mesh_dagster.core.snapshots.snapshot import ChangeCategory as C
from mesh_dagster.core.time.dates import to_end_ms, to_ms
from mesh_dagster.state.store import StateStore

WHEN = "2020-01-05"
FILES = {
    "models/seed.sql": """
        MODEL (name s.seed, kind SEED (path '../seeds/seed.csv'), columns (id INT, event_date DATE));
        """,
    "models/inc.sql": """
        MODEL (name s.inc, kind INCREMENTAL_BY_TIME_RANGE (time_column event_date), start '2020-01-01');

        SELECT id, event_date FROM s.seed WHERE event_date BETWEEN @start_date AND @end_date
        """,
    "models/full.sql": """
        MODEL (name s.full, kind FULL);

        SELECT id FROM s.inc
        """,
    "models/lonely.sql": """
        MODEL (name s.lonely, kind FULL, start '2019-06-01');

        SELECT 1 AS x
        """,
    "models/uses_ext.sql": """
        MODEL (name s.uses_ext, kind FULL);

        SELECT a FROM ext.raw
        """,
    "external_models.yaml": "- name: ext.raw\n  columns:\n    a: int\n",
    "seeds/seed.csv": "id,event_date\n1,2020-01-01\n2,2020-01-02\n",
}
ADD_COLUMN = ("models/inc.sql", "SELECT id, event_date", "SELECT id, event_date, 'z' AS new_column")


@pytest.fixture
def root(tmp_path, state) -> Path:
    """The project, applied to prod at WHEN."""
    root = write_project(tmp_path / "p", FILES)
    record_plan(build_plan(load_project(root, use_cache=False), state, execution_time=WHEN), state)
    return root


def add_column(root: Path) -> None:
    rel, old, new = ADD_COLUMN
    path = root / rel
    path.write_text(path.read_text().replace(old, new, 1))


def compared(root: Path, state, environment: str = "dev"):
    """The categorize step's inputs, as build_plan gathers them."""
    project = load_project(root, use_cache=False)
    base = resolve_base(state, environment)
    local = build_snapshots(project)
    stored, previous = known_snapshots(state, local, base)
    return project, base, local, stored, previous


def categorized(root: Path, state, environment: str = "dev") -> tuple[Project, ChangeSet]:
    project, base, local, stored, previous = compared(root, state, environment)
    return project, categorize_changes(project, local, stored, base.snapshots, previous)


# ------------------------------------------------------------------ resolve base


def test_an_existing_environment_is_compared_with_its_own_record(root, state):
    base = resolve_base(state, "prod")
    assert base.target == state.environments.get_environment("prod")
    assert base.create_from is None
    assert base.snapshots == base.target.snapshot_by_name()
    assert set(base.snapshots) == {"s.seed", "s.inc", "s.full", "s.lonely", "s.uses_ext", "ext.raw"}


def test_a_new_environment_is_compared_with_the_one_it_starts_from(root, state):
    base = resolve_base(state, "dev")
    assert base.target is None
    assert base.create_from == "prod"
    assert base.snapshots == state.environments.get_environment("prod").snapshot_by_name()


def test_a_new_environment_cannot_start_from_a_missing_development_environment(root, state):
    with pytest.raises(PlanError, match="Cannot create environment 'dev' from 'nope': it does not exist"):
        resolve_base(state, "dev", "nope")


def test_with_nothing_applied_a_plan_compares_with_nothing(state):
    assert resolve_base(state, "prod") == Base(None, None, {})
    assert resolve_base(state, "dev") == Base(None, "prod", {})  # an empty prod is a valid start


# ------------------------------------------------------------------ categorize


def test_changes_are_categorized_against_the_base_without_touching_the_inputs(root, state):
    add_column(root)
    project, base, local, stored, previous = compared(root, state)
    inputs = copy.deepcopy((local, stored, base.snapshots, previous))

    changes = categorize_changes(project, local, stored, base.snapshots, previous)

    assert changes.directly_modified == ["s.inc"]
    assert changes.indirectly_modified == {"s.inc": ["s.full"]}
    assert changes.categories == {"s.inc": C.NON_BREAKING, "s.full": C.INDIRECT_NON_BREAKING}
    assert changes.changed == {"s.inc", "s.full"}
    assert [s.name for s in changes.new_snapshots] == ["s.inc", "s.full"]
    assert changes.snapshots["s.inc"].version != previous["s.inc"].version  # a new table
    assert changes.snapshots["s.full"].version == previous["s.full"].version  # prod's table, kept
    assert changes.snapshots["s.inc"].rendered_query is not None
    assert list(changes.snapshots) == project.dag.sorted()
    # new snapshots are categorised copies; the local ones stay uncategorised
    assert (local, stored, base.snapshots, previous) == inputs
    assert local["s.inc"].version is None and local["s.inc"].rendered_query is None


def test_a_snapshot_stored_by_an_earlier_plan_is_reused_as_stored(root, state):
    add_column(root)
    first = build_plan(load_project(root, use_cache=False), state, "dev", execution_time=WHEN)
    state.snapshots.push_snapshots(first.new_snapshots)  # planned, never applied

    project, base, local, stored, previous = compared(root, state)
    changes = categorize_changes(project, local, stored, base.snapshots, previous)

    assert changes.new_snapshots == []
    inc = local["s.inc"].snapshot_id
    assert changes.snapshots["s.inc"] is stored[inc]
    assert changes.snapshots["s.inc"].version == first.snapshots["s.inc"].version
    assert changes.categories == first.categories


def test_a_snapshot_the_store_lost_is_rebuilt_from_the_environment_record(root, state):
    lost = state.environments.get_environment("prod").snapshot_by_name()["s.full"]
    state.snapshots.forget_snapshots([lost.snapshot_id], [])
    project, base, local, stored, previous = compared(root, state, "prod")

    changes = categorize_changes(project, local, stored, base.snapshots, previous)

    rebuilt = changes.snapshots["s.full"]
    assert (rebuilt.version, rebuilt.change_category) == (lost.version, C.BREAKING)
    assert (local["s.full"].version, local["s.full"].change_category) == (None, None)  # a copy was rebuilt
    assert changes.changed == set()


# ------------------------------------------------------------------ promoted set


def test_promoted_models(root, state):
    add_column(root)
    project, changes = categorized(root, state)
    order = project.dag.sorted()

    every_table = [n for n in order if n != "ext.raw"]  # an external model never gets a view
    assert promoted_models(changes, None, promote_all=True) == every_table
    assert promoted_models(changes, None, promote_all=False) == [n for n in order if n in {"s.inc", "s.full"}]
    shown = Environment(name="dev", plan_id="earlier", promoted=["s.lonely", "ext.raw"])
    assert promoted_models(changes, shown, promote_all=False) == [
        n for n in order if n in {"s.inc", "s.full", "s.lonely"}
    ]


# ------------------------------------------------------------------ validate range


def test_the_range_defaults_to_the_earliest_model_start_up_to_the_execution_time(root):
    project = load_project(root, use_cache=False)
    snapshots = build_snapshots(project)
    now = to_ms(WHEN)
    assert validate_range(project, snapshots, None, None, now) == (to_ms("2019-06-01"), now)  # s.lonely's
    assert validate_range(project, {}, None, None, now) == (now, now)
    assert validate_range(project, snapshots, "2020-01-02", "2020-01-03", now) == (
        to_ms("2020-01-02"), to_end_ms("2020-01-03"))


def test_the_range_refuses_an_end_in_the_future_and_a_start_after_the_end(root):
    project = load_project(root, use_cache=False)
    snapshots = build_snapshots(project)
    with pytest.raises(PlanError, match="The plan end cannot be in the future"):
        validate_range(project, snapshots, None, "2020-01-06", to_ms(WHEN))
    with pytest.raises(PlanError, match="The plan start 2020-01-04 is after its end"):
        validate_range(project, snapshots, "2020-01-04", "2020-01-02", to_ms(WHEN))


# ------------------------------------------------------------------ backfills


def test_prod_fills_every_models_gaps_a_development_environment_only_its_changes(root, state):
    add_column(root)
    project, changes = categorized(root, state)
    _, _, _, _, previous = compared(root, state)
    later = to_ms("2020-01-07")  # two more days due for every daily model

    def backfilled(is_prod: bool) -> set[str]:
        return set(plan_backfills(project, state.intervals, changes, previous, is_prod=is_prod, start=None, end=None,
                                  execution_ms=later))

    assert backfilled(is_prod=False) == {"s.inc", "s.full"}
    assert backfilled(is_prod=True) == {"s.inc", "s.full", "s.lonely", "s.uses_ext"}


# ------------------------------------------------------------------ the whole plan


class RecordingState:
    """The real store's parts a plan reads, remembering each object they hand to the plan with a
    deep copy taken before the plan could touch it."""

    def __init__(self, store: StateStore):
        self.handed: list[tuple[object, object]] = []
        self.environments = SimpleNamespace(get_environment=self._handing(store.environments.get_environment),
                                            get_environments=self._handing(store.environments.get_environments))
        self.snapshots = SimpleNamespace(get_snapshots=self._handing(store.snapshots.get_snapshots))
        self.intervals = SimpleNamespace(get_intervals=self._handing(store.intervals.get_intervals))

    def _handing(self, read):
        def hand(*args):
            value = read(*args)
            self.handed.append((value, copy.deepcopy(value)))
            return value
        return hand


def project_contents(project: Project) -> tuple:
    return (copy.deepcopy(project.models), copy.deepcopy(project.audits), project.dag.parents,
            project.dag.children, list(project.dag.sorted()), project.config.model_dump(),
            copy.deepcopy(project.variables), copy.deepcopy(project.seeds))


def test_build_plan_modifies_neither_the_project_nor_what_the_state_store_hands_it(root, state):
    """Every path of the comparison runs: new, stored-and-reused, lost and replaced snapshots."""
    add_column(root)
    state.snapshots.push_snapshots(build_plan(load_project(root, use_cache=False), state, "dev",
                                    execution_time=WHEN).new_snapshots)
    state.snapshots.forget_snapshots([state.environments.get_environment("prod").snapshot_by_name()["s.lonely"].snapshot_id], [])
    (root / "models/new.sql").write_text("MODEL (name s.new, kind FULL);\nSELECT id FROM s.full")
    project = load_project(root, use_cache=False)
    before = project_contents(project)
    reader = RecordingState(state)

    plan = build_plan(project, reader, "prod", execution_time=WHEN)

    assert plan.added == ["s.new"] and plan.directly_modified == ["s.inc"]
    assert {s.name for s in plan.new_snapshots} == {"s.new"}  # s.inc and s.full were stored already
    assert plan.snapshots["s.lonely"].change_category == C.BREAKING  # rebuilt from prod's record
    assert len(reader.handed) == 4  # the environment, stored, replaced snapshots, intervals
    for handed, as_handed in reader.handed:
        assert handed == as_handed
    assert project_contents(project) == before
