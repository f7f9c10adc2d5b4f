"""The promote job: a virtual update of the environment, refused while anything is missing.

It calls `Context.reviews.promote`, which builds the plan `mesh plan <env>` would build and applies it
with the same code once there is nothing left to backfill. Like `mesh plan`, it runs the project's
linter first: an error refuses the promotion. Promotions of one environment are serialised by the
environment lock, held from planning to the view swap: a promotion that waited finds its work done.
In Dagster the op also sits in the pool `mesh_promote_<env>`, which an instance can limit
(`concurrency: pools: {default_limit: 1, granularity: op}` in dagster.yaml).
"""

from dagster import JobDefinition, OpExecutionContext, job, op

from mesh_dagster.context import PromotionRefused
from mesh_dagster.core.errors import MeshError
from mesh_dagster.dagster.jobs.reviews import lint_gate
from mesh_dagster.dagster.mapping.listener import DagsterLogListener
from mesh_dagster.dagster.mapping.outcomes import JobFailed


def promote_job(environment: str) -> JobDefinition:
    @op(name=f"promote_{environment}_views", out={}, required_resource_keys={"mesh"},
        pool=f"mesh_promote_{environment}",
        description=f"Check that every model of '{environment}' has all its intervals, then swap its views.")
    def _promote(context: OpExecutionContext):
        mesh_context = context.resources.mesh.get_context(environment)
        try:
            lint_gate(context, mesh_context)
            plan = mesh_context.reviews.promote(environment, DagsterLogListener(context.log))
        except PromotionRefused as e:  # the gaps, one log line each, then the refusal in one message
            for gap in e.gaps:
                context.log.info(f"Missing in '{environment}': {gap.view}: {gap.describe()}")
            raise JobFailed(str(e)) from None
        except MeshError as e:  # refused (failed audits: listed) or failed, in one message
            raise JobFailed(str(e)) from None
        changed = plan.changed
        context.log.info(
            f"Environment '{plan.environment}' now points at the current versions"
            + (f" ({len(changed)} changed model(s): {', '.join(changed)})" if changed else "")
        )

    @job(name=f"promote_{environment}", tags={"mesh/environment": environment, "mesh/promote": "true"},
         description=f"Promote environment '{environment}': views → current versions, if nothing is missing.")
    def _job():
        _promote()

    return _job
