"""What a plan versions: the `snapshot` of a model (its `fingerprint`, and the `capture` of all that
decides its data besides the model file), an `environment` (which snapshots it serves) and the
comparison of two tables' contents (`table_diff`).

May import `core.project` and below.
"""
