"""One snapshot evaluated into its table: its query (SQL, Python model, custom materialization),
the write strategy of its kind, a kept table's schema migration, its session settings, its audits
and the verdicts they leave, and environment statements. May import the seams only (ports.py,
parts.py, events.py, locking.py)."""
