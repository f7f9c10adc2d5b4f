"""mesh_dagster: SQLMesh-style plans and virtual environments on Spark, orchestrated by Dagster."""

__version__ = "0.1.0"
