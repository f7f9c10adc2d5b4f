"""One description of the plan options (core/plan/flags.py) builds both front doors: `mesh plan`'s
flags and the config of Dagster's plan job. A flag the job cannot honour is no field of its config,
so Dagster refuses it by name."""

from __future__ import annotations

import click
import pytest

from mesh_dagster.cli.main import cli
from mesh_dagster.core.errors import PlanError
from mesh_dagster.core.plan.flags import JOB_FLAGS, PLAN_FLAGS, plan_options, refuse_in_restatement
from mesh_dagster.dagster.jobs.reviews import plan_job


def _plan_command_options() -> list[click.Option]:
    return [p for p in cli.commands["plan"].params if isinstance(p, click.Option)]


def test_every_flag_of_mesh_plan_comes_from_the_description_in_its_order():
    options = _plan_command_options()
    assert [o.name for o in options] == [f.name for f in PLAN_FLAGS]
    for option, flag in zip(options, PLAN_FLAGS):
        assert set(option.opts) | set(option.secondary_opts) == set(flag.spellings), flag.name
        assert option.help is not None and option.help.startswith(flag.help), flag.name


def test_the_dagster_plan_job_takes_the_flags_it_can_honour_and_no_other():
    (node,) = plan_job("dev").graph.node_defs
    fields = node.config_schema.config_type.fields
    assert set(fields) == {f.name for f in JOB_FLAGS} | {"author"}  # who makes the plan: no flag of `mesh plan`
    assert {f.name for f in PLAN_FLAGS} - set(fields) == {f.name for f in PLAN_FLAGS if f.cli_only}
    assert {"explain", "auto_apply", "no_prompts", "skip_linter"} <= {f.name for f in PLAN_FLAGS if f.cli_only}
    for flag in JOB_FLAGS:
        assert flag.help in fields[flag.name].description, flag.name


def test_flag_values_read_into_plan_options_with_their_selectors_resolved():
    chosen = []

    def select(selectors, flag):
        chosen.append((tuple(selectors), flag))
        return {"s.a"} if selectors else set()

    options = plan_options({"start": "2020-01-01", "create_from": "qa", "forward_only": True,
                            "allow_additive_model": ["s.*"], "select_model": ["s.a"], "min_intervals": 2}, select)
    assert (options.start, options.create_from, options.forward_only, options.min_intervals) == \
        ("2020-01-01", "qa", True, 2)
    assert options.allow_additive == frozenset({"s.a"}) and options.allow_destructive == frozenset()
    assert options.select_models == ("s.a",)
    assert (("s.*",), "--allow-additive-model") in chosen


@pytest.mark.parametrize(("name", "value", "said"), [
    ("start", "someday", "start (--start): 'someday' is not a date or time"),
    ("create_from", "", "create_from (--create-from): '' is not an environment name: it is empty"),
])
def test_a_bad_value_from_config_is_refused_naming_the_flag(name, value, said):
    with pytest.raises(PlanError) as e:
        plan_options({name: value}, lambda selectors, flag: set())
    assert str(e.value).startswith(said)


def test_a_restatement_refuses_every_flag_about_changes_naming_each_as_spelt():
    refuse_in_restatement({"start": "2020-01-01", "end": "2020-01-02", "restate_model": ("s.a",), "skip_tests": True})
    given = {"skip_backfill": True, "forward_only": True, "allow_additive_model": ("s.a",), "min_intervals": 3,
             "no_gaps": False, "start": "2020-01-01"}
    with pytest.raises(PlanError) as refused:
        refuse_in_restatement(given)
    assert str(refused.value) == ("--restate-model cannot be combined with --skip-backfill, --forward-only, "
                                  "--allow-additive-model, --min-intervals: a restatement changes no model")
