from tests.spark_fixtures import engine, spark, spark_launch_dir, unique_schema  # noqa: F401
