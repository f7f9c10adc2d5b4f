"""`mesh init`: the quickstart project, or an empty one, written from the files in `templates/`.

The templates are real files (not strings in code) so that what a user gets can be read, diffed
and edited as the project it is. Only `config.yaml` has placeholders, filled with
`string.Template` because YAML and SQL are full of braces but never use `$`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from string import Template

from mesh_dagster.core.config.config import CONFIG_FILES
from mesh_dagster.core.errors import MeshError

# Interactive questions of plain `mesh init`: option key -> label, in the order they are offered.
PROJECT_TYPES: dict[str, str] = {
    "default": "DEFAULT - Create the example project's models and files",
    "empty": "EMPTY   - Create a configuration file and project directories only",
}

# The same list, in the same order, as SQLMesh's wizard; only Spark runs mesh_dagster models.
ENGINES: dict[str, str] = {
    "duckdb": "DuckDB",
    "snowflake": "Snowflake",
    "databricks": "Databricks",
    "bigquery": "BigQuery",
    "motherduck": "MotherDuck",
    "clickhouse": "ClickHouse",
    "redshift": "Redshift",
    "spark": "Spark",
    "trino": "Trino",
    "azuresql": "Azure SQL",
    "mssql": "MSSQL",
    "postgres": "Postgres",
    "gcp_postgres": "GCP Postgres",
    "mysql": "MySQL",
    "athena": "Athena",
    "risingwave": "RisingWave",
}
SUPPORTED_ENGINES = ("spark",)

CLI_MODES: dict[str, str] = {
    "default": "DEFAULT - See and control every detail",
    "flow": "FLOW    - Automatically run changes and show summary output",
}

PROJECT_DIRS = ("models", "seeds", "audits", "tests", "macros")
DEFAULT_START_DAYS_AGO = 10

# FLOW mode: plans apply themselves without asking.
_FLOW_PLAN_SECTION = """
# --- Plan Defaults ---
# FLOW mode: plans are applied without prompting

plan:
  no_prompts: true
  auto_apply: true
"""


def init_project(
    path: Path,
    engine: str = "spark",
    template: str = "default",
    cli_mode: str = "default",
    today: date | None = None,
) -> list[Path]:
    """Write a new project into `path` (created if missing) and return the files written.

    Existing files other than the configuration are left untouched: `mesh init` in a folder
    that already holds some SQL must never destroy it.
    """
    _check_choice(engine, template, cli_mode)
    root = Path(path)
    for name in (*CONFIG_FILES, "config.py"):  # config.py: SQLMesh's Python configuration
        if (root / name).exists():
            raise MeshError("A project already exists here: refusing to overwrite its configuration",
                            root / name)
    root.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    for directory in PROJECT_DIRS:
        (root / directory).mkdir(exist_ok=True)
    created += _write_new(root / "config.yaml", render_config(cli_mode, today))
    created += _write_new(root / "macros" / "__init__.py", "")
    created += _add_gitignore(root / ".gitignore")
    if template == "default":
        for relative, text in _template_files("default"):
            created += _write_new(root / relative, text)
    return created


def render_config(cli_mode: str = "default", today: date | None = None) -> str:
    """The text of `config.yaml`: Spark gateway `local`, defaults starting ten days ago."""
    today = today or datetime.now(UTC).date()
    start = (today - timedelta(days=DEFAULT_START_DAYS_AGO)).isoformat()
    text = _templates().joinpath("config.yaml").read_text(encoding="utf-8")
    plan_section = _FLOW_PLAN_SECTION if cli_mode == "flow" else ""
    return Template(text).substitute(start=start, plan_section=plan_section)


def next_steps_message(path: Path) -> str:
    """What to do after `mesh init`, as shown by the CLI."""
    config = Path(path) / "config.yaml"
    return (
        "Your mesh_dagster project is ready!\n"
        "\n"
        "Next steps:\n"
        "- Update your gateway connection settings (e.g., a Spark master or Spark Connect remote)\n"
        "  in the project configuration file; the default embedded Spark needs no changes:\n"
        f"    {config}\n"
        "- Run command in CLI: mesh plan\n"
        "- (Optional) Explain a plan: mesh plan --explain\n"
        "- (Optional) Run the unit tests: mesh test\n"
        "\n"
        "Need help?\n"
        "- mesh --help, and mesh <command> --help\n"
    )


def check_engine(engine: str) -> None:
    """Refuse engines other than Spark with a message saying why (call it right after asking)."""
    key = engine.strip().lower()
    if key not in SUPPORTED_ENGINES:
        label = ENGINES.get(key, engine)
        raise MeshError(
            f"mesh_dagster runs models on Apache Spark only; {label} is not supported. "
            "Choose Spark (`mesh init spark`); Spark can still read from other systems through its connectors."
        )


def _check_choice(engine: str, template: str, cli_mode: str) -> None:
    check_engine(engine)
    if template not in PROJECT_TYPES:
        raise MeshError(f"Unknown project template '{template}'. Choose one of: {', '.join(PROJECT_TYPES)}")
    if cli_mode not in CLI_MODES:
        raise MeshError(f"Unknown CLI mode '{cli_mode}'. Choose one of: {', '.join(CLI_MODES)}")


def _templates() -> Traversable:
    return resources.files("mesh_dagster.scaffold").joinpath("templates")


def _template_files(name: str) -> list[tuple[Path, str]]:
    """(path relative to the project, text) of every file of a template, sorted."""
    out: list[tuple[Path, str]] = []

    def walk(node: Traversable, relative: Path) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__":
                continue
            if child.is_dir():
                walk(child, relative / child.name)
            else:
                out.append((relative / child.name, child.read_text(encoding="utf-8")))

    walk(_templates().joinpath(name), Path())
    return out


def _write_new(path: Path, text: str) -> list[Path]:
    if path.exists():
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return [path]


def _add_gitignore(path: Path) -> list[Path]:
    """Keep the local warehouse, metastore and state out of git, also in an existing .gitignore."""
    text = _templates().joinpath("gitignore").read_text(encoding="utf-8")
    if not path.exists():
        path.write_text(text, encoding="utf-8")
        return [path]
    existing = path.read_bytes()  # the user's file, in whatever encoding: only appended to, never re-encoded
    if any(line.strip() in (b".mesh", b".mesh/", b"/.mesh", b"/.mesh/") for line in existing.splitlines()):
        return []
    separator = b"" if existing.endswith(b"\n") or not existing else b"\n"
    path.write_bytes(existing + separator + text.encode("utf-8"))
    return [path]
