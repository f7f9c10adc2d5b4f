"""Model selectors (core/plan/selectors.py): parsing, evaluation over a tagged graph, and every error."""

from __future__ import annotations

import pytest
from project_builder import write_project

from mesh_dagster.core.errors import PlanError, SelectorError
from mesh_dagster.core.plan.selectors import ModelIndex, Selector, select_models
from mesh_dagster.core.project.project import load_project

#   s.seed -> s.orders -> s.revenue -> m.metrics_daily
#                     \-> m.test_orders
#   t.revenue (alone, a second `revenue`), x.lonely (alone, no tags)
TAGS = {
    "s.seed": ["raw"],
    "s.orders": ["finance"],
    "s.revenue": ["Finance", "deprecated"],  # tags match whatever their case
    "m.metrics_daily": ["fin_ops"],
    "m.test_orders": ["test"],
    "t.revenue": [],
    "x.lonely": [],
}
PARENTS = {
    "s.orders": ["s.seed"],
    "s.revenue": ["s.orders"],
    "m.metrics_daily": ["s.revenue"],
    "m.test_orders": ["s.orders"],
}
INDEX = ModelIndex(TAGS, PARENTS)
FLAG = "--select-model"


def sel(*selectors: str) -> set[str]:
    return select_models(selectors, INDEX, flag=FLAG)


def error(*selectors: str) -> str:
    with pytest.raises(SelectorError) as e:
        sel(*selectors)
    return str(e.value)


# ------------------------------------------------------------------ names and wildcards


def test_a_full_name_selects_that_model():
    assert sel("s.orders") == {"s.orders"}
    assert sel("S.Orders") == {"s.orders"}  # names are lower case, as the loader makes them
    assert sel("`s.orders`") == {"s.orders"}


def test_a_bare_name_selects_the_only_model_with_that_table_name():
    assert sel("orders") == {"s.orders"}
    assert sel("lonely") == {"x.lonely"}


def test_a_bare_name_shared_by_two_schemas_is_ambiguous():
    assert error("revenue") == "--select-model 'revenue' is ambiguous: s.revenue, t.revenue. Write the schema too."


def test_a_view_name_of_another_environment_selects_its_model():
    assert sel("s__dev.orders") == {"s.orders"}


def test_wildcards_match_full_names():
    assert sel("s.*") == {"s.seed", "s.orders", "s.revenue"}
    assert sel("*.revenue") == {"s.revenue", "t.revenue"}
    assert sel("m.*_orders") == {"m.test_orders"}
    assert sel("s*") == {"s.seed", "s.orders", "s.revenue"}  # schema prefix, not table names
    assert sel("*") == set(TAGS)


def test_a_wildcard_matches_dots_and_nothing_else_is_special():
    assert sel("s.*s") == {"s.orders"}  # `*` spans any run; `.` is a plain dot, not "any character"
    with pytest.raises(SelectorError, match="matches no model"):
        sel("s?orders")


# ------------------------------------------------------------------ tags


def test_tags_select_the_models_carrying_them_whatever_the_case():
    assert sel("tag:finance") == {"s.orders", "s.revenue"}
    assert sel("tag:FINANCE") == {"s.orders", "s.revenue"}


def test_tag_wildcards():
    assert sel("tag:fin*") == {"s.orders", "s.revenue", "m.metrics_daily"}
    assert sel("tag:*e*") == {"s.orders", "s.revenue", "m.test_orders"}  # finance, deprecated, test


# ------------------------------------------------------------------ upstream and downstream


def test_plus_before_adds_everything_upstream():
    assert sel("+s.revenue") == {"s.revenue", "s.orders", "s.seed"}
    assert sel("+s.seed") == {"s.seed"}


def test_plus_after_adds_everything_downstream():
    assert sel("s.orders+") == {"s.orders", "s.revenue", "m.metrics_daily", "m.test_orders"}
    assert sel("m.metrics_daily+") == {"m.metrics_daily"}


def test_plus_on_both_sides_and_on_wildcards_tags_and_groups():
    assert sel("+s.revenue+") == {"s.seed", "s.orders", "s.revenue", "m.metrics_daily"}
    assert sel("+m.*") == {"m.metrics_daily", "m.test_orders", "s.revenue", "s.orders", "s.seed"}
    assert sel("tag:raw+") == {"s.seed", "s.orders", "s.revenue", "m.metrics_daily", "m.test_orders"}
    assert sel("+(m.test_orders | t.revenue)") == {"m.test_orders", "s.orders", "s.seed", "t.revenue"}


# ------------------------------------------------------------------ operators


def test_and_or_not():
    assert sel("tag:finance & ^tag:deprecated") == {"s.orders"}
    assert sel("tag:raw | tag:test") == {"s.seed", "m.test_orders"}
    assert sel("^tag:fin*") == {"s.seed", "m.test_orders", "t.revenue", "x.lonely"}
    assert sel("^^s.seed") == {"s.seed"}


def test_the_examples_of_the_reference():
    assert sel("(tag:finance & ^tag:deprecated)") == {"s.orders"}
    assert sel("^(tag:test) & m.*") == {"m.metrics_daily"}


def test_not_binds_tighter_than_and_which_binds_tighter_than_or():
    # tag:raw | (tag:finance & (^s.orders))
    assert sel("tag:raw | tag:finance & ^s.orders") == {"s.seed", "s.revenue"}
    # (^tag:raw) & tag:finance: `^` applies to its operand only
    assert sel("^tag:raw & tag:finance") == {"s.orders", "s.revenue"}
    assert sel("(tag:raw | tag:finance) & ^s.orders") == {"s.seed", "s.revenue"}


def test_parentheses_group_and_nest_and_whitespace_does_not_matter():
    assert sel("^(tag:raw | (tag:finance & ^tag:deprecated))") == {
        "s.revenue", "m.metrics_daily", "m.test_orders", "t.revenue", "x.lonely"}
    assert sel("  ( tag:raw|tag:test )&^s.seed  ") == {"m.test_orders"}


def test_plus_binds_to_its_operand_inside_expressions():
    assert sel("+s.orders & tag:raw") == {"s.seed"}
    assert sel("^s.orders+") == {"s.seed", "t.revenue", "x.lonely"}  # not (orders and downstream)


def test_several_selectors_are_a_union():
    assert sel("s.seed", "tag:test", "x.lonely") == {"s.seed", "m.test_orders", "x.lonely"}


def test_inside_an_expression_a_tag_or_wildcard_may_match_nothing():
    assert sel("tag:finance & ^tag:nothing_is_tagged_so") == {"s.orders", "s.revenue"}
    assert sel("s.orders | zzz.*") == {"s.orders"}


# ------------------------------------------------------------------ nothing selected


def test_a_misspelt_name_lists_close_names():
    assert error("s.ordres") == "--select-model 's.ordres' matches no model. Did you mean: s.orders?"
    assert error("ordrs") == "--select-model 'ordrs' matches no model. Did you mean: s.orders?"


def test_a_misspelt_name_inside_an_expression_is_named():
    assert error("tag:finance | s.revnue") == \
        "--select-model 'tag:finance | s.revnue': 's.revnue' matches no model. Did you mean: s.revenue, t.revenue?"


def test_a_name_far_from_every_model_lists_the_models():
    message = error("nothing.like_it")
    assert message.startswith("--select-model 'nothing.like_it' matches no model. Models: m.metrics_daily, ")


def test_a_misspelt_tag_suggests_close_tags():
    assert error("tag:finnance") == "--select-model 'tag:finnance' matches no model. Did you mean: tag:finance?"
    assert error("tag:zzz") == ("--select-model 'tag:zzz' matches no model. "
                                "Tags: deprecated, fin_ops, finance, raw, test")


def test_a_selector_matching_nothing_is_an_error_even_when_each_part_matches():
    assert error("tag:raw & tag:test") == "--select-model 'tag:raw & tag:test' matches no model."
    assert error("^*") == "--select-model '^*' matches no model."


def test_each_repeated_selector_must_select_something():
    assert error("s.seed", "zz.*") == "--select-model 'zz.*' matches no model. Models: " + \
        "m.metrics_daily, m.test_orders, s.orders, s.revenue, s.seed, t.revenue, x.lonely"


def test_the_flag_named_is_the_callers():
    with pytest.raises(SelectorError, match=r"^--backfill-model 'nope' matches no model"):
        select_models(["nope"], INDEX, flag="--backfill-model")


def test_selector_errors_are_plan_errors():
    assert issubclass(SelectorError, PlanError)


def test_an_empty_project_says_so():
    with pytest.raises(SelectorError, match=r"^--select-model 'a.b' matches no model. There are no models.$"):
        select_models(["a.b"], ModelIndex({}, {}), flag=FLAG)


# ------------------------------------------------------------------ syntax errors


@pytest.mark.parametrize("text, message", [
    ("", "--select-model '': the selector is empty"),
    ("   ", "--select-model '   ': the selector is empty"),
    ("(tag:raw", "--select-model '(tag:raw', position 9 (the end): the '(' at position 1 is never closed"),
    ("tag:raw &", "--select-model 'tag:raw &', position 10 (the end): a model name, tag:NAME or '(' is missing"),
    ("tag:raw)", "--select-model 'tag:raw)', position 8: unexpected ')'"),
    ("s.seed s.orders", "--select-model 's.seed s.orders', position 8: 's.orders' follows another selector "
                        "without an operator: join them with & or |"),
    ("(s.seed) (s.orders)", "--select-model '(s.seed) (s.orders)', position 10: '(' follows another selector "
                            "without an operator: join them with & or |"),
    ("(s.seed s.orders)", "--select-model '(s.seed s.orders)', position 9: 's.orders' follows another selector "
                          "without an operator: join them with & or |"),
    ("& s.seed", "--select-model '& s.seed', position 1: unexpected '&' where a model name, tag:NAME or '(' belongs"),
    ("s.seed | | s.orders", "--select-model 's.seed | | s.orders', position 10: unexpected '|' where a model "
                            "name, tag:NAME or '(' belongs"),
    ("()", "--select-model '()', position 2: unexpected ')' where a model name, tag:NAME or '(' belongs"),
    ("^", "--select-model '^', position 2 (the end): a model name, tag:NAME or '(' is missing"),
    ("+", "--select-model '+', position 2 (the end): a model name, tag:NAME or '(' is missing"),
    ("+^s.seed", "--select-model '+^s.seed', position 2: unexpected '^' where a model name, tag:NAME or '(' belongs"),
    ("tag:", "--select-model 'tag:', position 1: 'tag:' needs a tag name"),
    ("s.seed | git:main", "--select-model 's.seed | git:main', position 10: unknown selector 'git:': write a "
                          "model name, a wildcard (schema.*) or tag:NAME"),
])
def test_syntax_errors_name_the_selector_and_the_position(text, message):
    with pytest.raises(SelectorError) as e:
        Selector.parse(text, FLAG)
    assert str(e.value) == message


def test_a_syntax_error_is_reported_before_any_model_is_looked_at():
    with pytest.raises(SelectorError, match="never closed"):
        select_models(["(nope"], ModelIndex({}, {}), flag=FLAG)


# ------------------------------------------------------------------ indexes


def test_an_index_of_a_loaded_project_carries_the_model_tags(tmp_path):
    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL, tags (finance, daily));\nSELECT 1 AS x\n",
        "models/b.sql": "MODEL (name s.b, kind FULL, tags (finance));\nSELECT x FROM s.a\n",
        "models/c.sql": "MODEL (name s.c, kind VIEW);\nSELECT x FROM s.b\n",
    })
    project = load_project(root, use_cache=False)
    index = ModelIndex.of_models(project.models, project.dag)
    assert select_models(["tag:finance & ^tag:daily"], index, flag=FLAG) == {"s.b"}
    assert select_models(["s.b+"], index, flag=FLAG) == {"s.b", "s.c"}
    assert select_models(["+c"], index, flag=FLAG) == {"s.a", "s.b", "s.c"}


def test_an_index_over_another_adds_the_models_it_lacks_and_keeps_its_own():
    local = ModelIndex({"s.a": ["new_tag"], "s.b": []}, {"s.b": ["s.a"]})
    environment = ModelIndex({"s.a": ["old_tag"], "s.gone": ["old_tag"]}, {"s.gone": ["s.a"]})
    both = local.over(environment)
    assert both.names == {"s.a", "s.b", "s.gone"}
    assert select_models(["tag:old_tag"], both, flag=FLAG) == {"s.gone"}  # s.a's tags are the local ones
    assert select_models(["s.a+"], both, flag=FLAG) == {"s.a", "s.b", "s.gone"}


def test_parents_outside_the_index_are_ignored():
    index = ModelIndex({"s.a": []}, {"s.a": ["somewhere.else"]})
    assert select_models(["+s.a"], index, flag=FLAG) == {"s.a"}


def test_with_upstream_and_with_downstream():
    assert INDEX.with_upstream({"s.revenue", "t.revenue"}) == {"s.seed", "s.orders", "s.revenue", "t.revenue"}
    assert INDEX.with_downstream({"s.revenue", "m.test_orders"}) == {"s.revenue", "m.metrics_daily", "m.test_orders"}


def test_an_index_of_snapshots_selects_what_an_environment_has(tmp_path):
    from project_builder import record_plan

    from mesh_dagster.core.plan.plan import build_plan
    from mesh_dagster.execution.intervals.run import environment_snapshots, run_scope
    from mesh_dagster.state.store import StateStore

    root = write_project(tmp_path / "p", {
        "models/a.sql": "MODEL (name s.a, kind FULL, tags (raw));\nSELECT 1 AS x\n",
        "models/b.sql": "MODEL (name s.b, kind FULL, tags (finance));\nSELECT x FROM s.a\n",
        "models/c.sql": "MODEL (name s.c, kind FULL, tags (finance));\nSELECT x FROM s.b\n",
    })
    state = StateStore(f"sqlite:///{tmp_path}/state.db")
    try:
        record_plan(build_plan(load_project(root, use_cache=False), state, execution_time="2020-01-05"), state)
        (root / "models" / "c.sql").unlink()  # the environment, not the project, is selected from
        _, snapshots = environment_snapshots(state, "prod")
    finally:
        state.close()
    index = ModelIndex.of_snapshots(snapshots)
    assert select_models(["tag:finance"], index, flag=FLAG) == {"s.b", "s.c"}
    assert run_scope(snapshots, ["s.c"]) == {"s.a", "s.b", "s.c"}  # `mesh run` adds the upstream...
    assert run_scope(snapshots, ["s.c"], auto_upstream=False) == {"s.c"}  # ...unless --no-auto-upstream
    with pytest.raises(SelectorError, match=r"^--select-model 's.d' matches no model. Did you mean: s.a, s.b, s.c\?$"):
        run_scope(snapshots, ["s.d"])
