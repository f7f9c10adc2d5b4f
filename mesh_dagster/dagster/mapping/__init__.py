"""What a model becomes in Dagster: the translator (one overridable method per decision), the graph of
assets with their keys, descriptions and plan tags, partitions, data and code versions, a model's
outcome as Dagster events, and how user text is shown. The bottom room: may import compat.py only."""
