"""The repositories of a multi-repo project: SQLMesh's `-p repo_1 -p repo_2`.

Several folders load as one project: one plan, one state, one set of environments, models of one
repository reading another's. As in SQLMesh, each repository keeps what decides its own models:
its `model_defaults`, its variables and its macros (two repositories may each define `@dup`, and
each one's models call their own). What runs the project is the first repository's: its gateways,
state connection, environment settings and `.mesh/` folder. A later repository's settings that
differ from the first's are not used, and the load warns, naming them; what a later repository
would have run on its own (`before_all` / `after_all`, signals, materializations) is refused
until it is supported, with what to do.

Names stay one namespace: a model, an audit or a test defined in two repositories is refused at
the second definition, as SQLMesh refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mesh_dagster.core.config.config import ProjectConfig
from mesh_dagster.core.errors import ConfigError, MeshError
from mesh_dagster.core.macros.user import MacroRegistry, load_macros
from mesh_dagster.core.models.definition import relative_path
from mesh_dagster.core.project.config_file import load_config

# What each repository decides for its own models; every other setting is the first repository's.
OWN_SETTINGS = ("model_defaults", "variables", "project")
# What a later repository would run or import on its own: refused there until supported.
_FIRST_ONLY_SETTINGS = ("before_all", "after_all")
_FIRST_ONLY_FOLDERS = ("signals", "materializations")


@dataclass
class Repo:
    """One repository of a project: its folder (`root`), its config, and what its models render
    with (its macros and variables). `shown` is the folder as messages show it, relative to the
    first repository (`.` for the first)."""

    root: Path
    config: ProjectConfig
    shown: str = "."
    variables: dict[str, Any] = field(default_factory=dict)
    macros: MacroRegistry = field(default_factory=MacroRegistry)


def other_repos(root: Path, config: ProjectConfig, paths: Sequence[str | Path]) -> list[Repo]:
    """The repositories after the first (`root`, whose config is `config`), each one's config read
    and checked against the first's: refused when it is no folder, is given twice, or lies inside
    another (its models would load twice)."""
    repos: list[Repo] = []
    seen = [root]
    for path in paths:
        folder = Path(path).resolve()
        if not folder.is_dir():
            raise ConfigError(f"Project directory not found: {folder} (given with -p)")
        nested = next((s for s in seen if folder.is_relative_to(s) or s.is_relative_to(folder)), None)
        if nested is not None:
            raise ConfigError(f"{folder} is given twice, or inside another repository of the project ({nested}): "
                              "give each repository's folder once, none inside another")
        seen.append(folder)
        shown = relative_path(folder, root)
        repos.append(Repo(folder, _load_repo_config(folder, shown), shown))
    _refuse_same_names(config, repos)
    return repos


def _load_repo_config(folder: Path, shown: str) -> ProjectConfig:
    try:
        config = load_config(folder)
    except MeshError as e:  # its file as the first repository's messages name files
        raise type(e)(e.message, f"{shown}/{e.path or 'config.yaml'}", e.line) from None
    for key in _FIRST_ONLY_SETTINGS:
        if config.statements(key):
            where, line = config.where((key,))
            raise ConfigError(f"{key} of a repository after the first is not supported yet: move its statements to "
                              f"the first repository's config (the one given first with -p)",
                              f"{shown}/{where or 'config.yaml'}", line)
    for name in _FIRST_ONLY_FOLDERS:
        if any((folder / name).glob("*.py")):
            raise ConfigError(f"{name}/ of a repository after the first is not supported yet: move it to the first "
                              "repository (the one given first with -p)", f"{shown}/{name}")
    return config


def _refuse_same_names(first: ProjectConfig, repos: list[Repo]) -> None:
    """Two repositories of one `project:` name could not be told apart in an environment."""
    names = {first.project} if first.project else set()
    for repo in repos:
        if repo.config.project and repo.config.project in names:
            where, line = repo.config.where(("project",))
            raise ConfigError(f"project: '{repo.config.project}' names another repository of this project too: give "
                              "each repository its own name", f"{repo.shown}/{where or 'config.yaml'}", line)
        names.add(repo.config.project)


def unused_settings(first: ProjectConfig, repo: Repo) -> str | None:
    """The warning naming a later repository's settings that differ from the first's: the first's
    run the project (SQLMesh's rule)."""
    ours = first.model_dump(exclude=set(OWN_SETTINGS))
    theirs = repo.config.model_dump(exclude=set(OWN_SETTINGS))
    differing = sorted(key for key in ours if ours[key] != theirs.get(key))
    if not differing:
        return None
    return (f"{repo.shown}/config.yaml: {', '.join(differing)} differ from the first repository's; a multi-repo "
            f"project runs on the first repository's settings (each repository's own: {', '.join(OWN_SETTINGS)})")


def repo_variables(config: ProjectConfig, gateway: str | None) -> dict[str, Any]:
    """A repository's variables: its own, with those of the selected gateway when it has one of that name."""
    name = config.selected_gateway(gateway)
    if name is not None and name not in config.gateways:
        return {k.lower(): v for k, v in config.variables.items()}
    return config.variables_for(gateway)


def load_repo_macros(repos: list[Repo]) -> None:
    """Each repository's macros, imported as a package of its own (`macros/` of two repositories
    are two packages, and `@dup` of each is its own)."""
    for index, repo in enumerate(repos):
        repo.macros = load_macros(repo.root / "macros", index, None if index == 0 else f"{repo.shown}/macros")
