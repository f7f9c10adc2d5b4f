"""A plan applied: snapshots recorded, physical tables created or migrated, missing intervals
backfilled (through intervals/), views moved (virtual update) and their statements run;
promotion; upkeep (upkeep.py, Context.upkeep): the state store's schema, environments retired, and
the janitor that drops what no environment uses. May import intervals/, evaluate/ and
the seams."""
