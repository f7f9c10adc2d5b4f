import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tests import bytecode, jvm_startup, spark_lane, system_packages  # noqa: E402 - needs the repository on sys.path

spark_lane.choose()  # through each project's warm server (the product's default), unless MESH_SPARK_SERVER=0

# The modules that take minutes (JVMs in processes of their own), longest first. Under xdist
# (`-n 2`, whole files per worker: `--dist loadfile` in pyproject.toml) they are handed out before
# everything else, so that the two workers end together on the many short modules instead of one
# worker starting a five-minute module when the other has nothing left. Order only: a module
# missing from this list (or a stale entry) changes nothing but the balance.
FIRST = (
    "tests/cli/test_kill_points.py",
    "tests/cli/test_killed_swaps.py",
    "tests/dagster/test_dagster_truth.py",
    "tests/cli/test_interrupted_backfill.py",
    "tests/dagster/test_git_webserver.py",
    "tests/cli/test_selectors_cli.py",
    "tests/spark/test_warm_server.py",
    "tests/cli/test_killed_server.py",
    "tests/dagster/test_dagster_webserver.py",
    "tests/cli/test_quickstart.py",
    "tests/team/test_team_metastore.py",
    "tests/team/test_team_cluster.py",
    "tests/dagster/test_ui_partitions.py",
    "tests/dagster/test_served_webserver.py",
    "tests/dagster/test_component.py",
    "tests/dagster/test_instance_postgres.py",
    "tests/dagster/test_run_status.py",
    "tests/spark/test_engine.py",
    "tests/races/test_unique_key_race.py",
    "tests/cli/test_killed_rewrite.py",
    "tests/races/test_one_writer.py",
    "tests/spark/test_connect_server.py",
    "tests/cli/test_create_external_models.py",
    "tests/dagster/test_dagster_materialize.py",
    "tests/dagster/test_ui_shutdown.py",
    "tests/cli/test_python_model_cli.py",
    "tests/dagster/test_git_worker.py",
    "tests/dagster/test_pushed_location_env.py",
    "tests/dagster/test_escaped_text_in_browser.py",
    "tests/spark/test_damaged_class_archive.py",
)


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists: the installs say what they do
def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # once per run, before workers start; inherited by them
        system_packages.install(config)
        bytecode.install()
        jvm_startup.install(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    jvm_startup.uninstall(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a run in one process keeps the plain collection order
    rank = {path: i for i, path in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(FIRST)))  # stable


IN_PROCESS_FIXTURES = frozenset({"spark", "engine"})  # tests/spark_fixtures.py: this process's embedded session


@pytest.fixture(autouse=True)
def _no_warm_server_left(request: pytest.FixtureRequest):
    """In the server lane, the warm servers a test's commands started in its `tmp_path` stop with it;
    a test running Spark in this process runs in the opt-out lane (spark_lane.in_process)."""
    embedded = (request.node.get_closest_marker("spark") is not None
                or bool(IN_PROCESS_FIXTURES & set(request.fixturenames)) or spark_lane.embedded_here())
    with spark_lane.in_process(embedded):
        yield
    spark_lane.stop_servers_under(request.node.funcargs.get("tmp_path"))


@pytest.fixture(autouse=True, scope="module")
def _no_warm_server_left_by_module(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """...nor those of a module's own project (a module-scoped fixture's, under this process's base
    temp); a module marked `spark` builds its module fixtures in the opt-out lane too."""
    with spark_lane.in_process(request.node.get_closest_marker("spark") is not None):
        yield
    spark_lane.stop_servers_under(tmp_path_factory.getbasetemp())
