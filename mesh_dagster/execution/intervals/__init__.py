"""Intervals: which are due and ready (signals, upstream data), missing physical tables, computing
them in batches under each table's lock (scheduler.py), `mesh run` and Dagster materializations,
a run's `before_all` / `after_all`. May import evaluate/ and the seams."""
