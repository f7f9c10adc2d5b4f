"""A watched git repository, through the git CLI: its branch heads, and a commit's files.

Never a parse of `.git/` by hand: `git for-each-ref` lists the heads, `git archive` hands over a
commit's tree (no checkout, no index, nothing of the repository is changed, so a bare repository
that people push to is read safely while pushes go on). Every call is bounded in time.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from mesh_dagster.core.errors import MeshError


class GitError(MeshError):
    """The repository cannot be read (missing, not a repository, git failed or took too long)."""


def branch_heads(repo: str | Path, timeout_s: float = 30) -> dict[str, str]:
    """{branch: commit sha} of the repository's local branches."""
    out = _git(repo, ["for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"], timeout_s)
    heads = {}
    for line in out.decode().splitlines():
        branch, _, sha = line.rpartition(" ")
        if branch and sha:
            heads[branch] = sha
    return heads


def commit_author(repo: str | Path, sha: str, timeout_s: float = 30) -> str:
    """The e-mail of the commit's author (who a git-driven plan is recorded for)."""
    return _git(repo, ["log", "-1", "--format=%ae", sha], timeout_s).decode().strip()


def export_commit(repo: str | Path, sha: str, dest: Path, timeout_s: float = 120) -> Path:
    """The files of commit `sha`, written under `dest` (a fresh folder). A link to a path outside
    them (`/etc/passwd`, `../../secret`) is refused: a push must not read the host's files."""
    data = _git(repo, ["archive", "--format=tar", sha], timeout_s)
    dest.mkdir(parents=True, exist_ok=False)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        try:
            tar.extractall(dest, filter="data")
        except tarfile.FilterError as e:
            target = f" ({e.tarinfo.linkname})" if e.tarinfo.linkname else ""
            raise GitError(f"{e}{target}: refused, a commit's files must stay inside it") from None
    return dest


def _git(repo: str | Path, args: list[str], timeout_s: float) -> bytes:
    path = Path(repo)
    if not path.exists():
        raise GitError(f"The git repository {path} does not exist")
    try:
        done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (the git CLI is needed to watch a repository)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} on {path} took longer than {timeout_s:g}s") from None
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]} on {path} failed: {reason[-1] if reason else f'exit {done.returncode}'}")
    return done.stdout
