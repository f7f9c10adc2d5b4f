"""Applying plans and running intervals: physical layer, backfill, audits, virtual update."""
