"""What a model is once read: its `definition` (the MODEL block's properties, read by
`property_values`), the `model` itself, its kinds (`kinds` is the registry; `kinds_base`,
`kinds_whole`, `kinds_incremental`, `kinds_scd_type_2` hold one class per kind, which carries what
differs between kinds and names its write strategy), seeds (`seeds`), Python models
(`python_model`, their captured code in `python_env`), the query builders for MERGE and SCD type 2
(`merge`, `scd2`) and how a kept table's columns evolve (`schema_evolution`).

May import `core.macros`, `core.config` and `core.time`.
"""
