"""What a project says before any model is read: `config.yaml` (`config`, with the Spark and state
connections in `connections` and the early check of `before_all`/`after_all` in `statements`),
the names mesh accepts and derives (`names`: models, environments, views, physical tables), column
types, dialects and table formats (`types`), and how user files are read and shown (`files`,
`parse_errors`, `display`, `redaction`, `user_modules`, the project `cache`).

May import `core.time` (and `core.errors`).
"""
