"""Who is acting, and from which commit: stored with every plan and every decision on it.

Identity is `MESH_USER`, else the git user e-mail of the project's repository, else the OS user.
The git CLI answers the questions (never a parse of `.git/` by hand); a project outside git, or
a machine without git, simply has no commit.
"""

from __future__ import annotations

import getpass
import os
import subprocess
from pathlib import Path

_GIT_TIMEOUT_S = 10


def current_user(project_dir: str | Path) -> str:
    explicit = os.environ.get("MESH_USER", "").strip()
    if explicit:
        return explicit
    email = git(project_dir, "config", "user.email")
    if email:
        return email
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return f"uid-{os.getuid()}"


def git_commit(project_dir: str | Path) -> str | None:
    return git(project_dir, "rev-parse", "HEAD")


def git_branch(project_dir: str | Path) -> str | None:
    branch = git(project_dir, "rev-parse", "--abbrev-ref", "HEAD")
    return None if branch in (None, "HEAD") else branch  # "HEAD": a detached checkout has no branch


def git(directory: str | Path, *args: str) -> str | None:
    """The trimmed output of `git -C directory args...`, or None when git cannot answer."""
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None
