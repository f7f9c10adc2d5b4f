"""Planning: what changed (`changes`, `selected_changes`, `selectors`), how each change is
categorized (`categorizer`, `manual_categories`, `forward_only`, `schema_changes`), what must be
computed (`backfills`, `restatement`), the `plan` that puts it together from its typed `options`,
and the record a reviewer approves (`review`, `identity`).

The top layer of core/: may import every other core package.
"""
