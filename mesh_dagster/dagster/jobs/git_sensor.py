"""Git pushes become plans: a sensor watching the repository of `config.yaml`'s `git:` section.

The cursor is the last seen commit of each watched branch. A tick only lists the branch heads
(bounded by `git.tick_timeout_s`) and asks for one `git_plan` run per branch that moved or
disappeared; the run does the work. A push to a protected branch records a pending plan for prod;
any other branch's push is planned, backfilled and promoted into the environment named after the
branch (`feature/x` → `feature_x`), from the commit's own files — in a git worker, a process of its
own (execution/plans/git_worker.py): pushed code never runs in this one. A deleted branch invalidates its
environment.
"""

import json

from dagster import (
    DefaultSensorStatus,
    Field,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    job,
    op,
    sensor,
)

from mesh_dagster.context import Context
from mesh_dagster.core.config.display import printable, printable_line
from mesh_dagster.core.errors import MeshError
from mesh_dagster.core.plan.review import markdown_block
from mesh_dagster.dagster.jobs.reviews import data_diff_metadata
from mesh_dagster.dagster.mapping.listener import DagsterLogListener
from mesh_dagster.dagster.mapping.outcomes import JobFailed
from mesh_dagster.dagster.mapping.shown_text import shown_metadata

GIT_PLAN_JOB = "git_plan"


def git_plan_job() -> JobDefinition:
    @op(name="git_plan_commit", required_resource_keys={"mesh"}, out=Out(Nothing),  # no IO manager: nothing to store
        config_schema={"branch": Field(str, description="The branch that moved (or was deleted)."),
                       "sha": Field(str, default_value="", description="Its new head; empty: the branch is gone.")},
        description="Plan a pushed commit: pending for prod (protected branches), applied for other branches.")
    def _plan_commit(context: OpExecutionContext):
        branch, sha = context.op_config["branch"], context.op_config["sha"]
        mesh = context.resources.mesh.get_context()
        try:
            if not sha:
                gone = mesh.reviews.git_branch_deleted(branch)
                context.log.info(printable(f"Branch {branch} deleted: " + (f"environment '{gone}' invalidated" if gone
                                                                            else "it had no environment")))
                yield Output(None, metadata=shown_metadata({"branch": branch, "invalidated": gone or ""}))
                return
            record = mesh.reviews.plan_git_commit(branch, sha, DagsterLogListener(context.log))
        except MeshError as e:
            raise JobFailed(str(e)) from None
        failure = record.events[-1].note if record.status.value == "failed" else None
        # User text (the error quotes the project) shown, never rendered: control characters escaped.
        summary = markdown_block(failure) if failure else record.summary.markdown(record.environment)
        yield Output(None, metadata=shown_metadata({
            "plan_id": record.plan_id, "environment": record.environment, "status": record.status.value,
            "branch": branch, "commit": sha, "author": record.author, "summary": MetadataValue.md(summary),
            **data_diff_metadata(record)}))
        if failure:  # recorded as failed (its project does not load): the run says so too
            raise JobFailed(failure)

    @job(name=GIT_PLAN_JOB, tags={"mesh/git": "true"}, description="Plan (and, outside prod, apply) a pushed commit.")
    def _job():
        _plan_commit()

    return _job


def git_sensor(project_dir: str, gateway: str | None, state_url: str | None, plan_job: JobDefinition,
               running: bool, interval_s: int) -> SensorDefinition:
    @sensor(name="git_push_sensor", job=plan_job, minimum_interval_seconds=interval_s,
            default_status=DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED,
            description="Watches the git repository of config.yaml's `git:` section: a push becomes a plan.")
    def _sensor(context: SensorEvaluationContext):
        ctx = Context(project_dir, gateway, state_url=state_url)
        try:
            heads = ctx.reviews.git_heads()
        except MeshError as e:  # a missing repository, git failing or too slow: say so, try again next tick
            return SkipReason(printable(f"Cannot read the git repository: {e}"))
        finally:
            ctx.close()
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        requests = [_request(branch, sha) for branch, sha in sorted(heads.items()) if seen.get(branch) != sha]
        requests += [_request(branch, "", seen[branch]) for branch in sorted(set(seen) - set(heads))]
        context.update_cursor(json.dumps(heads, sort_keys=True))
        return requests or SkipReason("No watched branch moved")

    return _sensor


def _request(branch: str, sha: str, old: str = "") -> RunRequest:
    return RunRequest(run_key=f"{branch}@{sha or old + ':deleted'}",
                      run_config={"ops": {"git_plan_commit": {"config": {"branch": branch, "sha": sha}}}},
                      tags={"mesh/git_branch": printable_line(branch), "mesh/git_sha": sha or "deleted"})
