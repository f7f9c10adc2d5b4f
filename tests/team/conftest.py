"""Fixtures of the team deployment tests: real Postgres, a Spark standalone cluster, a user-run
Spark Connect server (tests/team/services.py)."""

from tests.team.services import scratch_db, standalone_cluster, user_connect_server  # noqa: F401
