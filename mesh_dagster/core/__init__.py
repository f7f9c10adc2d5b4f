"""Pure domain layer: no pyspark, no dagster imports allowed here."""
