"""The restate job: `mesh plan <env> --restate-model ...` from Dagster.

Its op takes the selection and range as run config, builds the restatement plan through Context
(the environment's own snapshots: local edits are not part of it) and applies it with the same
code as the CLI, under the environment's lock. Each recomputed model is reported as a
materialization of its asset, so the UI shows when its data last changed.
"""

from dagster import AssetMaterialization, Field, JobDefinition, OpExecutionContext, job, op

from mesh_dagster.core.config.names import view_name
from mesh_dagster.core.errors import MeshError
from mesh_dagster.dagster.jobs.reviews import lint_gate
from mesh_dagster.dagster.mapping.listener import DagsterLogListener
from mesh_dagster.dagster.mapping.outcomes import JobFailed


def restate_job(environment: str) -> JobDefinition:
    @op(name=f"restate_{environment}_models", out={}, required_resource_keys={"mesh"},
        pool=f"mesh_promote_{environment}",
        config_schema={
            "models": Field([str], description="Model selectors: these models and everything below them."),
            "start": Field(str, is_required=False, description="Start of the range (default: all history)."),
            "end": Field(str, is_required=False, description="End of the range, inclusive for dates."),
        },
        description=f"Recompute models of '{environment}' (and their downstream) over a range.")
    def _restate(context: OpExecutionContext):
        config = context.op_config
        mesh_context = context.resources.mesh.get_context(environment)
        try:
            lint_gate(context, mesh_context)  # as `mesh plan --restate-model` does
            plan = mesh_context.plans.restate(environment, config["models"], start=config.get("start"),
                                        end=config.get("end"))
            for warning in plan.warnings:
                context.log.warning(warning)
            mesh_context.reviews.apply(plan, DagsterLogListener(context.log))
        except MeshError as e:
            raise JobFailed(str(e)) from None
        for name in plan.restated:
            schema, _, table = view_name(name, environment).rpartition(".")
            context.log_event(AssetMaterialization(asset_key=[schema, table], description="restated",
                                                   metadata={"restated_from": str(plan.start),
                                                             "restated_to": str(plan.end)}))

    @job(name=f"restate_{environment}", tags={"mesh/environment": environment, "mesh/restate": "true"},
         description=f"Restate models of '{environment}': recompute them and their downstream over a range.")
    def _job():
        _restate()

    return _job
