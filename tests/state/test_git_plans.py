"""Git-driven plans on real git repositories (a bare one people push to, created here), against real
SQLite and real Postgres (no Spark: the in-memory engine stands for it).

A push to a feature branch is planned and applied into the environment named after it, from the
commit's own files; a push to the protected branch records a pending plan for prod that a second
person approves; a plan outdated by a newer push is refused as superseded; a deleted branch
invalidates its environment; bad branches, broken commits and missing repositories say so. Pushes to
the protected branch, broken commits and a superseded apply go through the git worker (a process of
its own); an apply runs the worker's half here, where the in-memory engine is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from project_builder import write_project

from mesh_dagster.context import Context
from mesh_dagster.core.plan.review import BranchError, PlanRecord, PlanStatus
from mesh_dagster.execution.plans.git_repo import GitError
from mesh_dagster.execution.plans.records import PlanSupersededError
from tests.execution.fake_engine import FakeEngine

MODELS = {
    "models/a.sql": """
        MODEL (name s.a, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), start '2020-01-01');
        SELECT 1 AS id, CAST(@start_ds AS DATE) AS ds
        """,
    "models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id FROM s.a\n",
}
PROJECT_CONFIG = "model_defaults:\n  dialect: spark\n  start: 2020-01-01\n"
# The code location's project: it watches the bare repository, protects prod.
WATCHER_CONFIG = PROJECT_CONFIG + """protected_environments:
  prod:
    approvers: [bob@example.com]
git:
  repo: ../warehouse.git
  branches: ['*']
  protected: [main]
"""


def git(cwd: Path, *args: str, email: str = "alice@example.com") -> str:
    env_args = ["-c", f"user.email={email}", "-c", "user.name=Someone"]
    done = subprocess.run(["git", *env_args, "-C", str(cwd), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


class Repo:
    """A bare repository and a clone that commits and pushes to it."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "warehouse.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        self.clone = root / "clone"
        subprocess.run(["git", "clone", "-q", str(self.bare), str(self.clone)], check=True, capture_output=True)
        git(self.clone, "checkout", "-q", "-b", "main")

    def commit(self, files: dict[str, str], message: str, email: str = "alice@example.com") -> str:
        write_project(self.clone, files, PROJECT_CONFIG)
        git(self.clone, "add", "-A")
        git(self.clone, "commit", "-qm", message, email=email)
        return git(self.clone, "rev-parse", "HEAD")

    def push(self, branch: str) -> None:
        git(self.clone, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path)


def watcher(tmp_path: Path, state_url: str, engine: FakeEngine | None = None) -> Context:
    # Its own working tree holds no models at all: plans must come from the pushed commits.
    root = write_project(tmp_path / "location", {}, WATCHER_CONFIG)
    return Context(root, state_url=state_url, engine=engine or FakeEngine())


def applied_here(ctx: Context, branch: str, sha: str) -> PlanRecord:
    """The git worker's half of `plan_git_commit`, in this process, so the in-memory engine applies
    the plan (tests/dagster/test_git_worker.py runs the worker itself, on Spark)."""
    return ctx.reviews.plan_pushed_commit(ctx.reviews.git_request(branch, sha))


def approved_here(ctx: Context, plan_id: str) -> PlanRecord:
    """The git worker's half of `apply_recorded` for a pushed commit's plan, in this process."""
    return ctx.reviews.work(ctx.reviews.apply_request(ctx.reviews.records.find(plan_id)))


def test_pushes_become_plans_per_branch_and_prod_waits_for_a_second_person(tmp_path, state_url, repo, monkeypatch):
    main = repo.commit(MODELS, "models")
    repo.push("main")
    feature = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, 2 AS x FROM s.a\n"}, "x")
    repo.push("feature/x")
    ctx = watcher(tmp_path, state_url)
    assert ctx.reviews.git_heads() == {"main": main, "feature/x": feature}

    pending = ctx.reviews.plan_git_commit("main", main)
    assert (pending.environment, pending.status, pending.author) == ("prod", PlanStatus.PENDING, "alice@example.com")
    assert (pending.git_commit, pending.git_branch) == (main, "main")
    assert ctx.state.environments.get_environment("prod") is None

    done = applied_here(ctx, "feature/x", feature)  # not protected: planned, backfilled and promoted
    assert (done.environment, done.status) == ("feature_x", PlanStatus.COMPLETED)
    env = ctx.state.environments.get_environment("feature_x")
    assert env is not None and env.plan_id == done.plan_id and sorted(env.promoted) == ["s.a", "s.b"]

    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(pending.plan_id, "approve")
    assert approved_here(ctx, pending.plan_id).status == PlanStatus.COMPLETED
    assert ctx.state.environments.get_environment("prod").plan_id == pending.plan_id


def test_an_approved_plan_outdated_by_a_new_push_is_superseded(tmp_path, state_url, repo, monkeypatch):
    first = repo.commit(MODELS, "models")
    repo.push("main")
    ctx = watcher(tmp_path, state_url)
    record = ctx.reviews.plan_git_commit("main", first)
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(record.plan_id, "approve")
    second = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, 3 AS y FROM s.a\n"}, "y")
    repo.push("main")
    with pytest.raises(PlanSupersededError, match=f"branch main moved on to {second[:8]}"):
        ctx.reviews.apply_recorded(record.plan_id)
    assert ctx.reviews.records.find(record.plan_id).status == PlanStatus.SUPERSEDED
    assert ctx.state.environments.get_environment("prod") is None


def test_no_empty_plan_waits_and_a_newer_push_supersedes_the_one_waiting(tmp_path, state_url, repo, monkeypatch):
    """Issue 38, point 5: a push to main changing no model records no plan for a reviewer (it is done,
    saying why, and prod is untouched); a newer push's plan supersedes the one its branch left waiting."""
    from mesh_dagster.execution.plans.reviews import NOTHING_TO_APPLY

    first = repo.commit(MODELS, "models")
    repo.push("main")
    ctx = watcher(tmp_path, state_url)
    served = applied_here(ctx, "main", first)
    monkeypatch.setenv("MESH_USER", "bob@example.com")
    ctx.decide(served.plan_id, "approve")
    assert approved_here(ctx, served.plan_id).status == PlanStatus.COMPLETED

    docs = repo.commit({"README.md": "How to run it\n"}, "docs only")
    repo.push("main")
    empty = applied_here(ctx, "main", docs)
    assert empty.status == PlanStatus.COMPLETED and [e.note for e in empty.events][-2] == NOTHING_TO_APPLY
    assert ctx.state.environments.get_environment("prod").plan_id == served.plan_id  # nothing moved

    change = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, 3 AS y FROM s.a\n"}, "y")
    repo.push("main")
    waiting = applied_here(ctx, "main", change)
    newer = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL);\nSELECT id, 4 AS y FROM s.a\n"}, "y4")
    repo.push("main")
    assert applied_here(ctx, "main", newer).status == PlanStatus.PENDING
    superseded = ctx.reviews.records.find(waiting.plan_id)
    assert superseded.status == PlanStatus.SUPERSEDED
    assert superseded.events[-1].note == f"branch main moved on to {newer[:8]}"
    assert [r.plan_id for r in ctx.plan_records("prod", ["pending"])] == [ctx.plan_records("prod")[0].plan_id]


def test_a_deleted_branch_invalidates_its_environment(tmp_path, state_url, repo):
    sha = repo.commit(MODELS, "models")
    repo.push("feature/gone")
    ctx = watcher(tmp_path, state_url)
    applied_here(ctx, "feature/gone", sha)
    git(repo.clone, "push", "-q", "origin", "--delete", "feature/gone")
    assert "feature/gone" not in ctx.reviews.git_heads()
    assert ctx.reviews.git_branch_deleted("feature/gone") == "feature_gone"
    assert ctx.state.environments.get_environment("feature_gone").expiration_ts is not None  # the janitor removes it
    assert ctx.reviews.git_branch_deleted("never/pushed") is None


def test_bad_branches_broken_commits_and_missing_repositories(tmp_path, state_url, repo):
    sha = repo.commit(MODELS, "models")
    repo.push("Prod")
    ctx = watcher(tmp_path, state_url)
    with pytest.raises(BranchError, match="only 'prod' names the production environment"):
        ctx.reviews.plan_git_commit("Prod", sha)
    with pytest.raises(BranchError, match="would plan the protected environment 'prod'"):
        ctx.reviews.plan_git_commit("prod", sha)

    broken = repo.commit({"models/b.sql": "MODEL (name s.b, kind FULL, nonsense 1);\nSELECT 1\n"}, "broken")
    repo.push("feature/broken")
    failed = ctx.reviews.plan_git_commit("feature/broken", broken)
    assert failed.status == PlanStatus.FAILED
    assert failed.events[-1].note.startswith(f"commit {broken[:8]}: models/b.sql:1: Unknown model property 'nonsense'")
    assert ctx.state.environments.get_environment("feature_broken") is None  # nothing applied
    assert [r.status for r in ctx.plan_records()] == [PlanStatus.FAILED]

    (repo.bare.parent / "moved.git").mkdir()
    repo.bare.rename(repo.bare.parent / "elsewhere.git")
    with pytest.raises(GitError, match="warehouse.git does not exist"):
        ctx.reviews.git_heads()
