"""A model's query as Spark will run it: rendering (`renderer`), the columns a query produces
(`query_columns`, and a model's output columns in `model_outputs`) and the canonical form that
decides whether a change is one (`canonical`).

May import `core.models` and below.
"""
