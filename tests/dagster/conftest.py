from tests.spark_fixtures import engine, project_schema, spark, spark_launch_dir, unique_schema  # noqa: F401
