"""The scaffold's commented "Team deployment" keys, moved into the connection as its comment says,
make a configuration mesh accepts and a shared catalog (no Spark needed)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from mesh_dagster.core.project.config_file import load_config
from mesh_dagster.scaffold.init import init_project


def test_team_deployment_keys_are_valid_config(tmp_path: Path, monkeypatch) -> None:
    init_project(tmp_path, today=date(2025, 6, 22))
    text = (tmp_path / "config.yaml").read_text()
    section = text[text.index("# --- Team deployment ---"):]
    keys = [line.split("# <--")[0].rstrip().replace("#       ", "      ", 1)
            for line in section.splitlines() if line.startswith("#       ")]
    assert keys[0].strip().startswith("master:")
    text = text.replace("      master: local[*]           # <-- or a cluster master, e.g. spark://host:7077, yarn\n",
                        "\n".join(keys) + "\n")
    (tmp_path / "config.yaml").write_text(text)
    monkeypatch.setenv("MESH_METASTORE_PASSWORD", "s3cret")

    connection = load_config(tmp_path).gateway().connection
    assert connection.master == "spark://127.0.0.1:7077" and connection.connect_timeout == 10
    assert connection.metastore is not None and connection.metastore.type == "postgres"
    assert connection.metastore.database == "mesh_metastore" and connection.metastore.password == "s3cret"
    assert connection.warehouse == "/shared/warehouse"
    assert connection.shared_catalog
