"""A Session survives kill -9 of the daemon and of its own process, and sees each net change once.

Each trial plugs and unplugs simulated accessories, then kills accmond, the app (tests/session_child.py, a Session
in a process of its own), or both, with SIGKILL at a random moment: while events are in flight, within or after
the daemon's 100 ms state-writing window. The daemon restarts on the same state directory, with the simulated
accessories it had saved; the app restarts with the same restore id. Then the test waits until the app's view
equals the daemon's, and checks the app's record: within each run of the app, every event applies (no connect of a
connection it has, no disconnect of one it lacks), no change comes twice, and numbers never go down.
``ACCMON_SESSION_TRIALS`` sets the number of trials (default 24), ``ACCMON_SESSION_SEED`` the seed. The trials
begin once the app's session is in the daemon's state file: one begun within the 100 ms before a crash is lost with
it (docs/SESSIONS.md §5), and the app then rightly starts afresh.

accmond saves its simulated accessories with the rest of its state, at most every 100 ms: one unplugged within that
window before a SIGKILL is plugged in again at the restart, with its old connection id. The app then rightly gets
its ``connect`` a second time; the test allows that second connect (and the disconnect after it) for exactly the
connections it saw come back that way, and counts them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import AbstractSet, Any, Dict, List, Set, Tuple

import pytest

from accmon.simulator import SimulatedDaemon
from conftest import child_environment

CHILD = Path(__file__).resolve().parent / "session_child.py"
TRIALS = int(os.environ.get("ACCMON_SESSION_TRIALS", "24"))


def read_runs(path: Path) -> List[List[Dict[str, Any]]]:
    """The record, split into runs of the app: each begins at its ``start`` line (whole lines only)."""
    runs: List[List[Dict[str, Any]]] = []
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        entry = json.loads(line)
        if "start" in entry:
            runs.append([entry])
        elif runs:
            runs[-1].append(entry)
    return runs


def check_run(run: List[Dict[str, Any]], resurrected: AbstractSet[int] = frozenset()) -> Set[int]:
    """Checks one run of the app; returns its view at the end. `resurrected`: the connections accmond plugged in
    again after a kill (see the module's documentation), whose changes may come twice."""
    view: Set[int] = set(run[0]["accessories"])
    changes: Set[Tuple[str, int]] = set()
    last_seq = 0
    for entry in run[1:]:
        if "change" not in entry:
            continue
        change, key, seq = entry["change"], entry["id"], entry["seq"]
        context = f"run of pid {run[0]['start']}: {change} of {key} (seq {seq})"
        if change == "connect":
            assert key not in view, f"{context}: the app has that connection already"
            view.add(key)
        else:
            assert key in view, f"{context}: the app does not have that connection"
            view.remove(key)
        assert (change, key) not in changes or key in resurrected, f"{context}: handed twice"
        changes.add((change, key))
        assert seq >= last_seq, f"{context}: sequence number went down from {last_seq}"
        last_seq = seq
    return view


def start_app(daemon: SimulatedDaemon, record: Path) -> "subprocess.Popen[bytes]":
    app = subprocess.Popen(
        [sys.executable, str(CHILD), daemon.socket, "trial", str(record)],
        env=child_environment(),
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while not any(run[0]["start"] == app.pid for run in read_runs(record)):
        assert app.poll() is None, f"the app exited with status {app.returncode} at start"
        assert time.monotonic() < deadline, "the app did not start within 15 s"
        time.sleep(0.005)
    return app


def wait_until_in_sync(
    daemon: SimulatedDaemon, record: Path, app: "subprocess.Popen[bytes]", trial: int, resurrected: Set[int]
) -> Set[int]:
    """Waits until the app is connected to the daemon (its process holds the session) and its view is the
    daemon's."""
    deadline = time.monotonic() + 15
    while True:
        truth = {accessory.connection_id for accessory in daemon.list()}
        view = check_run(read_runs(record)[-1], resurrected)
        connected = any(client["pid"] == app.pid and client["subscribed"] for client in daemon.client().status().clients)
        if view == truth and connected:
            return truth
        if time.monotonic() > deadline:
            pytest.fail(f"trial {trial}: the app's view {sorted(view)} is not the daemon's {sorted(truth)} after 15 s")
        time.sleep(0.01)


def wait_until_saved(daemon: SimulatedDaemon, restore_id: str) -> None:
    """Waits until the daemon's state file holds the session of `restore_id`. A session begun less than the write
    interval (100 ms) before a crash is lost with it, as docs/SESSIONS.md §5 says; the trials are of sessions that
    were saved."""
    path = Path(daemon.state_dir) / "state.json"
    deadline = time.monotonic() + 15
    while True:
        try:
            sessions = json.loads(path.read_text())["sessions"]
        except (OSError, ValueError, KeyError):
            sessions = []  # not written yet, or replaced between the look and the read
        if any(session["restoreID"] == restore_id for session in sessions):
            return
        assert time.monotonic() < deadline, f"the session '{restore_id}' is not in {path} after 15 s"
        time.sleep(0.01)


def storm(daemon: SimulatedDaemon, rng: random.Random, count: int, unplugged: Set[int]) -> None:
    for _ in range(count):
        connected = [accessory.connection_id for accessory in daemon.list()]
        if connected and rng.random() < 0.45:
            victim = rng.choice(connected)
            daemon.unplug(victim)
            unplugged.add(victim)
        else:
            daemon.plug(kind=rng.choice(["usb", "serial"]), vendor="1209", serial=f"T{rng.randrange(10**6)}")


def test_a_session_survives_kill_9_of_the_daemon_and_of_its_process(accmond: SimulatedDaemon, tmp_path: Path) -> None:
    seed = int(os.environ.get("ACCMON_SESSION_SEED", str(random.randrange(10**9))))
    print(f"ACCMON_SESSION_SEED={seed}")
    rng = random.Random(seed)
    record = tmp_path / "record.jsonl"
    app = start_app(accmond, record)
    wait_until_saved(accmond, "trial")
    kills = {"daemon": 0, "app": 0, "daemon alone": 0}
    unplugged: Set[int] = set()
    resurrected: Set[int] = set()
    try:
        for trial in range(TRIALS):
            storm(accmond, rng, rng.randint(1, 8), unplugged)
            victims = rng.choice([("daemon",), ("app",), ("daemon", "app")])
            time.sleep(rng.choice([0.0, 0.003, 0.03, 0.15]))
            if "app" in victims:
                app.kill()
                app.wait()
            if "daemon" in victims:
                accmond.kill()
            for victim in victims:
                kills[victim] += 1
            kills["daemon alone"] += victims == ("daemon",)
            if "daemon" in victims:
                accmond.start()
                back = {accessory.connection_id for accessory in accmond.list()} & unplugged
                resurrected |= back
                unplugged -= back
            if "app" in victims:
                storm(accmond, rng, rng.randint(0, 4), unplugged)  # while the app is away
                app = start_app(accmond, record)
            wait_until_in_sync(accmond, record, app, trial, resurrected)
            assert app.poll() is None, f"trial {trial}: the app exited with status {app.returncode}"
    finally:
        app.kill()
        app.wait()
    runs = read_runs(record)
    for run in runs:
        check_run(run, resurrected)
    reconnections = sum(1 for run in runs for entry in run if entry.get("state") == "reconnecting")
    restored = sum(1 for run in runs if run[0]["restored"])
    events = sum(1 for run in runs for entry in run if "change" in entry)
    print(f"{TRIALS} trials: {kills['daemon']} daemon kills, {kills['app']} app kills, {len(runs)} app runs "
          f"({restored} restored), {reconnections} reconnection attempts, {events} events, "
          f"{len(resurrected)} unplugged accessories back after a kill")  # fmt: skip
    assert TRIALS >= 20
    assert len(runs) == kills["app"] + 1 and restored == kills["app"]
    # Each kill of the daemon alone broke a running app's link, which reconnected.
    assert kills["daemon alone"] > 0 and reconnections >= kills["daemon alone"]
