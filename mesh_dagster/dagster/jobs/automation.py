"""`automation_<env>_sensor`: Dagster's declarative automation runs the environment's models on
their crons, as `mesh run` does (the conditions are mapping/automation.py's, or a translator's).

One sensor per environment, over the models that have a condition. It is evaluated in the code
server (`use_user_code_server`): the condition asks the project's state store and calls the
models' signals, which only the code location can do, and a custom condition cannot be sent to the
daemon. Its runs carry the schedules' tag (`mesh/scheduled`): they fill what is due.

Stopped by default, like the schedules: loading a project in the UI must never start writing
prod's tables on its own. Start it in the UI (Automation), or with
`definitions(..., automation_running=True)` (the component's `automation_running: true`) where
the code location is the deployment. It replaces the `run_prod_<cron>_schedule`s: run one or the
other (both running would compete for the same intervals).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from dagster import (
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    AutomationConditionSensorDefinition,
    BetaWarning,
    DefaultSensorStatus,
)

from mesh_dagster.dagster.assets import SCHEDULED_TAG


def automation_sensor(environment: str, assets: Sequence[AssetsDefinition | AssetSpec],
                      running: bool) -> list[AutomationConditionSensorDefinition]:
    """The sensor over the environment's `assets` that have an automation condition; none when none has."""
    keys = [key for a in assets if isinstance(a, AssetsDefinition)
            for key, condition in a.automation_conditions_by_key.items() if condition is not None]
    if not keys:
        return []
    with warnings.catch_warnings():  # `use_user_code_server` is beta in Dagster 1.13: known and wanted
        warnings.filterwarnings("ignore", category=BetaWarning)
        return [AutomationConditionSensorDefinition(
            f"automation_{environment}_sensor",
            target=AssetSelection.assets(*keys),
            use_user_code_server=True,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            run_tags={SCHEDULED_TAG: "true"},
            description=f"Materializes the models of '{environment}' as `mesh run` would: each due interval "
                        "once its parents have recorded it and its signals pass (each model's automation "
                        "condition). Use it or the run_*_schedules, not both.",
        )]
