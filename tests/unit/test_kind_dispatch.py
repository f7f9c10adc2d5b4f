"""Every kind dispatches for itself: what differs between kinds is asked of the kind, never of
its class, and the kind names its write strategy, which `strategy_for` looks up.

Adding a kind is a kind class, a strategy class (unless an existing one writes it) and tests:
these tests fail when a kind names no registered strategy, and when code outside the kind
modules asks `isinstance(..., SomeKind)` again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mesh_dagster.core.config.config import SchemaChangePolicy
from mesh_dagster.core.models.kinds import (
    KIND_CLASSES,
    BaseKind,
    Batching,
    CustomKind,
    EmbeddedKind,
    ExternalKind,
    FullKind,
    IncrementalByPartitionKind,
    IncrementalByTimeRangeKind,
    IncrementalByUniqueKeyKind,
    IncrementalUnmanagedKind,
    ScdType2ByColumnKind,
    ScdType2ByTimeKind,
    SeedKind,
    StandaloneAuditKind,
    ViewKind,
)
from mesh_dagster.core.models.model import Model
from mesh_dagster.execution.evaluate.custom_materialization import CustomStrategy
from mesh_dagster.execution.evaluate.strategies import (
    STRATEGIES,
    AppendStrategy,
    FullStrategy,
    NothingStrategy,
    PartitionsStrategy,
    ScdType2Strategy,
    SeedStrategy,
    TimeRangeStrategy,
    UniqueKeyStrategy,
    ViewStrategy,
    WriteStrategy,
    strategy_of,
    writes,
)

PACKAGE = Path(__file__).resolve().parents[2] / "mesh_dagster"

# Each kind (and each way a kind is written) with the strategy the isinstance chain that came
# before the registry chose for it: the lookup must choose the same.
EXPECTED: list[tuple[str, BaseKind, type[WriteStrategy]]] = [
    ("SEED", SeedKind(path="/p/s.csv"), SeedStrategy),
    ("FULL", FullKind(), FullStrategy),
    ("VIEW", ViewKind(), ViewStrategy),
    ("VIEW (materialized true)", ViewKind(materialized=True), FullStrategy),
    ("INCREMENTAL_BY_TIME_RANGE", IncrementalByTimeRangeKind(time_column="ds"), TimeRangeStrategy),
    ("INCREMENTAL_BY_UNIQUE_KEY", IncrementalByUniqueKeyKind(unique_key=("id",)), UniqueKeyStrategy),
    ("INCREMENTAL_BY_PARTITION", IncrementalByPartitionKind(), PartitionsStrategy),
    ("INCREMENTAL_UNMANAGED", IncrementalUnmanagedKind(), AppendStrategy),
    ("INCREMENTAL_UNMANAGED (insert_overwrite true)", IncrementalUnmanagedKind(insert_overwrite=True),
     PartitionsStrategy),
    ("SCD_TYPE_2_BY_TIME", ScdType2ByTimeKind(unique_key=["id"]), ScdType2Strategy),
    ("SCD_TYPE_2_BY_COLUMN", ScdType2ByColumnKind(unique_key=["id"], columns="*"), ScdType2Strategy),
    ("EMBEDDED", EmbeddedKind(), NothingStrategy),
    ("EXTERNAL", ExternalKind(), NothingStrategy),
    ("CUSTOM", CustomKind(materialization="m"), CustomStrategy),
    ("STANDALONE_AUDIT", StandaloneAuditKind(), NothingStrategy),
]


def test_every_kind_class_has_a_registered_strategy() -> None:
    for name, cls in KIND_CLASSES.items():
        assert cls in STRATEGIES, f"{name.value} ({cls.__name__}): no strategy registers for it (@writes)"


def test_the_examples_cover_every_kind() -> None:
    assert {type(kind) for _, kind, _ in EXPECTED} == set(KIND_CLASSES.values())


@pytest.mark.parametrize(("label", "kind", "expected"), EXPECTED, ids=[label for label, _, _ in EXPECTED])
def test_each_kind_gets_the_strategy_it_always_had(label: str, kind: BaseKind, expected: type[WriteStrategy]) -> None:
    strategy = strategy_of(kind)
    assert type(strategy) is expected
    assert strategy is STRATEGIES[kind.written_as]  # one instance per strategy, looked up by kind class


def test_a_kind_with_no_registered_strategy_fails_with_the_kinds_there_are() -> None:
    class UnwrittenKind(FullKind):
        pass

    with pytest.raises(LookupError, match="written as UnwrittenKind.*no strategy class registers.*known are .*FullKind"):
        strategy_of(UnwrittenKind())


def test_a_new_kind_is_written_by_the_strategy_registered_for_its_class() -> None:
    class OtherKind(FullKind):
        pass

    with pytest.raises(LookupError):
        strategy_of(OtherKind())
    try:
        @writes(OtherKind)
        class OtherStrategy(FullStrategy):
            pass

        assert type(strategy_of(OtherKind())) is OtherStrategy
    finally:
        STRATEGIES.pop(OtherKind, None)


def test_two_strategies_cannot_write_one_kind() -> None:
    with pytest.raises(ValueError, match="Two write strategies write FullKind"):
        writes(FullKind)(type("AnotherFull", (FullStrategy,), {}))
    assert type(STRATEGIES[FullKind]) is FullStrategy


# What model.py computed by isinstance before the kinds carried it: (time_column, batch_size,
# lookback, batch_concurrency, forward_only, disable_restatement, schema change policies).
ALLOW, ERROR = SchemaChangePolicy.ALLOW, SchemaChangePolicy.ERROR
MODEL_ATTRIBUTES: dict[str, tuple] = {
    "SEED": (None, None, 0, 1, False, False, (ALLOW, ALLOW)),
    "FULL": (None, None, 0, 1, False, False, (ALLOW, ALLOW)),
    "VIEW": (None, None, 0, 1, False, False, (ALLOW, ALLOW)),
    "INCREMENTAL_BY_TIME_RANGE": ("ds", 3, 2, 4, False, False, (ERROR, ALLOW)),
    "INCREMENTAL_BY_UNIQUE_KEY": (None, 3, 2, 1, False, False, (ERROR, ALLOW)),
    "INCREMENTAL_BY_PARTITION": (None, None, 0, 1, True, False, (ERROR, ALLOW)),
    "INCREMENTAL_UNMANAGED": (None, None, 0, 1, True, True, (ERROR, ALLOW)),
    "SCD_TYPE_2_BY_TIME": (None, 3, 0, 1, True, True, (ERROR, ALLOW)),
    "EMBEDDED": (None, None, 0, 1, False, False, (ALLOW, ALLOW)),
    "EXTERNAL": (None, None, 0, 1, False, False, (ALLOW, ALLOW)),
}
ATTRIBUTE_KINDS: dict[str, BaseKind] = {
    "SEED": SeedKind(path="/p/s.csv"), "FULL": FullKind(), "VIEW": ViewKind(),
    "INCREMENTAL_BY_TIME_RANGE": IncrementalByTimeRangeKind(time_column="ds", batch_size=3, lookback=2,
                                                            batch_concurrency=4),
    "INCREMENTAL_BY_UNIQUE_KEY": IncrementalByUniqueKeyKind(unique_key=("id",), batch_size=3, lookback=2),
    "INCREMENTAL_BY_PARTITION": IncrementalByPartitionKind(), "INCREMENTAL_UNMANAGED": IncrementalUnmanagedKind(),
    "SCD_TYPE_2_BY_TIME": ScdType2ByTimeKind(unique_key=["id"], batch_size=3),
    "EMBEDDED": EmbeddedKind(), "EXTERNAL": ExternalKind(),
}


@pytest.mark.parametrize("label", sorted(MODEL_ATTRIBUTES))
def test_a_model_takes_what_differs_between_kinds_from_its_kind(label: str) -> None:
    model = Model(name="s.m", kind=ATTRIBUTE_KINDS[label])
    found = (model.time_column, model.batch_size, model.lookback, model.batch_concurrency, model.forward_only,
             model.disable_restatement, model.schema_change_policies)
    assert found == MODEL_ATTRIBUTES[label]


def test_kinds_built_whole_have_one_batch_and_no_kind_specific_accessor() -> None:
    kind = FullKind()
    assert kind.batching == Batching(None, 0, 1)
    assert (kind.seed, kind.time_range, kind.scd_type_2, kind.upsert, kind.custom) == (None, None, None, None, None)
    seed, time_range = SeedKind(path="/p/s.csv"), IncrementalByTimeRangeKind(time_column="ds")
    scd, unique = ScdType2ByTimeKind(unique_key=["id"]), IncrementalByUniqueKeyKind(unique_key=("id",))
    assert (seed.seed, time_range.time_range, scd.scd_type_2) == (seed, time_range, scd)
    assert unique.upsert is not None and unique.upsert.keys == ("id",)


def test_python_models_may_be_full_or_of_a_kind_keeping_history() -> None:
    allowed = {name.value for name, cls in KIND_CLASSES.items() if cls.allows_python}
    assert allowed == {"FULL", "INCREMENTAL_BY_TIME_RANGE", "INCREMENTAL_BY_UNIQUE_KEY", "INCREMENTAL_BY_PARTITION",
                       "INCREMENTAL_UNMANAGED", "SCD_TYPE_2_BY_TIME", "SCD_TYPE_2_BY_COLUMN", "CUSTOM"}


def _kind_isinstance_sites(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
            and len(node.args) == 2 and "Kind" in ast.unparse(node.args[1])]


def test_no_code_outside_the_kind_modules_asks_a_kind_for_its_class() -> None:
    sites = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if "kinds" not in path.stem for line in _kind_isinstance_sites(path)]
    assert sites == [], "ask the kind (an attribute or method of BaseKind) instead of isinstance: " + ", ".join(sites)


def test_the_kind_says_what_building_its_model_does() -> None:
    """`mesh plan --explain`'s step for each model (cli/console.py asks the kind, never its name)."""
    steps = {label: (kind.build_step(False), kind.build_step(True)) for label, kind, _ in EXPECTED}
    assert steps["SEED"] == ("Insert seed file", "Insert seed file")
    assert steps["VIEW"] == ("Recreate view", "Recreate view")
    assert steps["VIEW (materialized true)"] == steps["FULL"] == (None, "Fully refresh table")
    assert steps["INCREMENTAL_BY_TIME_RANGE"] == (None, "Fully refresh table")
