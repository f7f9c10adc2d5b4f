"""The project and its warehouse inside Dagster steps.

A step gets a `Context` (the same API the CLI uses) for the run's process; its Spark session comes
from `Context.engine`, which picks the project's connection — with the local default, the shared
Spark Connect server when it runs, so concurrent runs and the `mesh` CLI reach one warehouse.
With a catalog every process may open (a Postgres metastore, a cluster, `remote:`), each run
starts its own session instead, whatever `shared_spark` says.
"""

from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from mesh_dagster.context import Context

PYSPARK_SOURCE = "PySparkResource.spark_config"  # how messages name the settings' origin


class MeshResource(ConfigurableResource):
    """A mesh project: `get_context()` for plans and materializations, `spark` for the session."""

    project_dir: str
    # The other repositories of a multi-repo project (core/project/repos.py), loaded with `project_dir`.
    repos: list[str] = []
    gateway: Optional[str] = None  # noqa: UP045 - Dagster's config schema needs Optional
    state_url: Optional[str] = None  # noqa: UP045
    # With a local master and the embedded Derby metastore, use the project's shared Spark Connect
    # server (started on demand): concurrent runs and the `mesh` CLI then reach one warehouse
    # instead of fighting over Derby. Ignored when the project's catalog needs no sharing.
    shared_spark: bool = True
    # Environments shown from the files of the commit a git push deployed to them (execution/
    # deployed.py): environment -> those files; `.mesh/` stays `project_dir`'s.
    sources: dict[str, str] = {}
    # Spark settings from a dagster-pyspark `PySparkResource` given to `definitions(pyspark=...)`,
    # merged with the gateway's connection (core/config/spark_settings.py).
    spark_config: dict[str, str] = {}

    _contexts: dict = PrivateAttr(default_factory=dict)

    def get_context(self, environment: str | None = None) -> Context:
        """The Context of the project as `environment` is shown: its deployed commit's files, or the
        project's (one Context per folder, for the run)."""
        folder = self.sources.get(environment or "", self.project_dir)
        if folder not in self._contexts:
            home = self.project_dir if folder != self.project_dir else None
            context = Context(folder, self.gateway, state_url=self.state_url, home=home, repos=self.repos,
                              spark_config=self.spark_config,
                              spark_config_source=PYSPARK_SOURCE)
            if self.shared_spark and context.connection.has_server:
                # A run worker is a process of its own: asking for the shared server here affects this run only.
                Context.prefer_shared_spark()
            self._contexts[folder] = context
        return self._contexts[folder]

    @property
    def spark(self):
        """The SparkSession of this run's Context (started on first use): the one Python models get as
        `context.spark`, with the PySparkResource's settings."""
        return self.get_context().engine.session.spark

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        for mesh_context in self._contexts.values():
            mesh_context.close()
        self._contexts.clear()
