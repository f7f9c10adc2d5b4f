"""A plan applied: snapshots recorded, physical tables created or migrated, missing intervals
backfilled (through intervals/), views moved (virtual update) and their statements run;
promotion; the janitor that drops what no environment uses. May import intervals/, evaluate/ and
the seams."""
