"""Applying plans and running intervals, in rooms named for what they do. Each room imports only
the rooms below it (import-linter's `execution-rooms` contract, pyproject.toml):

    inspection.py  looking at data: render, evaluate, audit, table diffs, the catalog (Context.inspection)
    plans/         plans made, recorded, reviewed and applied from their records or a pushed commit
    apply/         a plan applied: physical tables, backfill, virtual update; promotion; upkeep, the janitor
    intervals/     which intervals are due and ready, computing them in batches: runs, materializations
                   (Context.runs)
    evaluate/      one snapshot evaluated: its query or Python model, write strategy, audits, verdicts
    ports.py, parts.py, events.py, locking.py, notify.py
                   the seams: the state store and Spark as execution/ sees them (Protocols: it never
                   imports state/'s SQL or engine/), Context's parts, what listeners hear, locks,
                   notifications
"""
