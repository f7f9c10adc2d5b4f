"""A project on disk read into definitions: `project` (loading, with `config_file` for the checks on
config.yaml that need a reader), the readers of SQL and Python models (`model_reader`,
`python_model_reader`), audits, signals, external models, the `before_all`/`after_all` statements
(`environment_statements`) and the model graph (`dag`).

May import `core.sql` and below.
"""
