"""SQLMesh-style macros on SQL text: the `evaluator` that expands them, the `syntax` it scans (calls,
arguments, lambdas), the user's Python macros (`user`, bound by `calls`, their values converted by
`coercion`), and the built-in macros, which register themselves in `registry` as their modules
load (`builtins`: control flow; `library`: expressions; `queries`: whole queries; `clauses`).
SQLMesh's Jinja (`JINJA_QUERY_BEGIN` blocks, `macros/*.sql`) is `jinja`, rendered before them.

May import `core.config` and `core.time`.
"""
