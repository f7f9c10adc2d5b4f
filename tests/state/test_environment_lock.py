import subprocess
import sys

from mesh_dagster.execution.locking import environment_lock, lock_owner
from mesh_dagster.state.store import StateStore


def test_lock_of_a_dead_process_is_taken_over_at_once(tmp_path):
    store = StateStore(f"sqlite:///{tmp_path}/s.db")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    owner = lock_owner().replace(f"pid {__import__('os').getpid()}", f"pid {pid}")
    # Simulate a holder that was killed: its lock row stays behind with a long lease.
    assert store.locks.try_lock("environment:prod", owner, "tok", 3600) is None
    assert store.locks.lock_holder("environment:prod").owner == owner
    with environment_lock(store, "prod", timeout_s=2):
        assert store.locks.lock_holder("environment:prod").owner == lock_owner()
    assert store.locks.lock_holder("environment:prod") is None
    store.close()
