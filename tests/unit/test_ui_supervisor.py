"""`mesh ui`'s supervisor with real processes but no Dagster: a stand-in for `dagster dev` whose
descendants resist (ignore SIGTERM, outlive their parent, sit in another process group) must all
be gone after one stop signal; a process that starts its own session (as the project's Spark
Connect server does) must survive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from mesh_dagster.dagster.ui.lock import UiAlreadyRunning, check_ui_free, only_ui
from mesh_dagster.dagster.ui.supervisor import GRACE_S, KILL_WAIT_S, _children, _send, _session_members
from mesh_dagster.dagster.ui.workspace import dagster_dev_command
from tests.listening_sockets import session_members

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find processes")

# Stands in for `dagster dev`: a stubborn tree, reported as JSON once it is up.
STAND_IN = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    orphan_maker = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {stubborn!r}])"
    kids = [subprocess.Popen([sys.executable, "-c", stubborn]),                       # ignores SIGTERM
            subprocess.Popen([sys.executable, "-c", orphan_maker]),                   # exits, leaves an orphan
            subprocess.Popen([sys.executable, "-c", stubborn], process_group=0),      # a group of its own
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],  # a session of its own
                             start_new_session=True)]
    time.sleep(1.5)
    signal.signal(signal.SIGINT, signal.SIG_IGN)                                      # deaf to Ctrl-C
    print(json.dumps({"pid": os.getpid(), "own_session": kids[-1].pid}), flush=True)
    time.sleep(600)
""")
SUPERVISE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from mesh_dagster.dagster.ui.supervisor import Supervisor
    sys.exit(Supervisor([sys.executable, "-c", sys.argv[1]], None, Path(sys.argv[2])).run())
""")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def supervised(tmp_path):
    """A supervisor over the stand-in: (its Popen, the stand-in's session members, the own-session pid)."""
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISE, STAND_IN, str(tmp_path / "dagster")],
                                  stdout=subprocess.PIPE, text=True)
    started = json.loads(supervisor.stdout.readline())
    tree = session_members(started["pid"])
    try:
        yield supervisor, tree, started["own_session"]
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        for pid in [*session_members(started["pid"]), started["own_session"]]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_one_signal_ends_the_whole_tree_but_not_a_session_of_its_own(supervised):
    supervisor, tree, own_session = supervised
    assert len(tree) == 4, tree  # the stand-in, two children and the orphan
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=GRACE_S + 2 * KILL_WAIT_S + 5)
    assert supervisor.returncode == 128 + signal.SIGTERM
    assert [pid for pid in tree if _alive(pid)] == []
    assert _alive(own_session)


def test_a_second_signal_does_not_wait_for_the_grace_period(supervised):
    supervisor, tree, _ = supervised
    supervisor.send_signal(signal.SIGINT)
    time.sleep(0.5)
    started = time.monotonic()
    supervisor.send_signal(signal.SIGINT)
    supervisor.wait(timeout=GRACE_S + 2 * KILL_WAIT_S + 5)
    assert time.monotonic() - started < GRACE_S  # the stubborn ones were killed without waiting
    assert supervisor.returncode == 128 + signal.SIGINT
    assert [pid for pid in tree if _alive(pid)] == []


def test_a_second_mesh_ui_for_the_project_is_refused(tmp_path):
    home = tmp_path / ".mesh" / "dagster"
    with only_ui(home):
        done = subprocess.run(dagster_dev_command(home / "workspace.yaml", "127.0.0.1", 1), capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: `mesh ui` already runs for this project (pid {os.getpid()}, instance {home}): use its webserver, "
        f"or stop it (Ctrl-C) before starting another.")
    assert "dagster" not in done.stdout.lower()  # refused before starting anything


# Holds the `mesh ui` lock of a project until killed.
HOLD_UI = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mesh_dagster.dagster.ui.lock import only_ui
    with only_ui(Path(sys.argv[1])):
        print("HOLDING", flush=True)
        time.sleep(600)
""")


def test_the_lock_of_a_killed_mesh_ui_is_taken_over(tmp_path):
    home = tmp_path / ".mesh" / "dagster"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_UI, str(home)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HOLDING"
        with pytest.raises(UiAlreadyRunning) as refused:
            check_ui_free(home)
        assert f"(pid {holder.pid}, instance {home})" in str(refused.value)
        assert (home / "ui.lock").read_text() == str(holder.pid)  # a contender does not wipe the holder's pid
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the lock file stays behind
        holder.wait(timeout=60)
        holder.stdout.close()
    assert (home / "ui.lock").exists()
    with only_ui(home):
        assert (home / "ui.lock").read_text() == str(os.getpid())
    check_ui_free(home)  # released on exit


# A session leader with a child, a child in a group of its own, and an orphan (its parent exited).
TREE = textwrap.dedent("""
    import json, os, subprocess, sys, time
    sleep = "import time; time.sleep(600)"
    orphan_maker = f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {sleep!r}]).pid)"
    child = subprocess.Popen([sys.executable, "-c", sleep])
    grouped = subprocess.Popen([sys.executable, "-c", sleep], process_group=0)
    maker = subprocess.Popen([sys.executable, "-c", orphan_maker], stdout=subprocess.PIPE, text=True)
    orphan = int(maker.stdout.readline())
    maker.wait()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)     # exited, left unreaped: a zombie
    print(json.dumps({"children": [child.pid, grouped.pid], "orphan": orphan, "zombie": dead.pid}), flush=True)
    time.sleep(600)
""")


def test_a_session_is_found_whole_and_stopped(tmp_path):
    leader = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        tree = json.loads(leader.stdout.readline())
        assert _alive(tree["orphan"]) and not _alive(tree["zombie"])
        assert sorted(p.pid for p in _children(leader.pid)) == sorted(tree["children"])  # the zombie is left out
        members = _session_members(leader.pid)
        assert sorted(p.pid for p in members) == sorted([leader.pid, *tree["children"], tree["orphan"]])
        assert _session_members(os.getsid(0)) and leader.pid not in [p.pid for p in _session_members(os.getsid(0))]
        for process in members:
            _send(process, signal.SIGKILL)
        leader.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _session_members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _session_members(leader.pid) == []
        _send(members[0], signal.SIGTERM)  # gone (its pid may even be reused): nothing is signalled, nothing raised
    finally:
        for pid in [leader.pid, *session_members(leader.pid)]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        leader.wait(timeout=30)
        leader.stdout.close()
