"""What Dagster shows for data computed elsewhere (a plan applied by the CLI, another environment, a
run of the past): stamps of served versions (stamps.py), re-stamp runs (restamps.py), the audit
verdicts that hold on served data (verdicts.py). May import mapping/ and compat.py."""
