"""The pure domain: no pyspark, no dagster, nothing of the layers above (state, engine, execution).

Eight packages in layers, each importing only those below it (import-linter's `core-layers`
contract in pyproject.toml checks it), bottom to top: `time`, `config`, `macros`, `models`, `sql`,
`project`, `snapshots`, `plan`; `errors` is shared by all. Each package's docstring says what
lives there.
"""
