"""Local mode (no ``--broker``): one host from its accmond, through ``accmon watch --json`` (and ``accmon history
--json`` where it exists), in the real browser against a real ``accmond --simulate --no-udev``."""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Iterator, List

import pytest
from accmon.simulator import SimulatedDaemon
from page import cell_text, fetch, host_status, mark_page, rows, state, still_marked
from rig import ACCMON, ACCMOND, DashboardProcess, eventually

HISTORY_WRAPPER = """#!/bin/sh
# accmon, with a fixture 'history' command (what `accmon history --json` prints, 2 s late); the rest is the real
# accmon.
for argument; do
  if [ "$argument" = history ]; then sleep 2; cat "$ACCMON_FIXTURE_HISTORY"; exit 0; fi
done
exec "$ACCMON_REAL" "$@"
"""


@pytest.fixture
def daemon() -> Iterator[SimulatedDaemon]:
    with SimulatedDaemon(ACCMOND) as simulated:
        yield simulated


def local_dashboard(daemon: SimulatedDaemon, accmon: str = ACCMON, **environment: str) -> DashboardProcess:
    return DashboardProcess(["--socket", daemon.socket, "--host-name", "bench-7", "--accmon", accmon],
                            environment=environment)  # fmt: skip


def local_truth(daemon: SimulatedDaemon) -> set:  # type: ignore[type-arg]
    return {("bench-7", accessory.connection_id) for accessory in daemon.list()}


def test_one_host_live_offline_and_back(browser: Any, daemon: SimulatedDaemon) -> None:
    daemon.plug(kind="serial", vendor="0403", product="6001", name="FT232R", nodes=["/dev/ttyUSB0"])
    dashboard = local_dashboard(daemon)
    try:
        browser.get(dashboard.url + "/")
        mark_page(browser)
        eventually(lambda: rows(browser) == local_truth(daemon), 15, "the row of the adapter")
        assert host_status(browser, "bench-7") == "online"
        board = daemon.plug(kind="usb", vendor="1209", product="0001", name="Board", serial="B1")
        eventually(lambda: ("bench-7", board) in rows(browser), 15, "the new row")
        daemon.unplug(board)
        eventually(lambda: ("bench-7", board) not in rows(browser), 15, "the row to leave")
        # The events seen live carry accmond's sequence numbers (the adapter's connect comes from accmond's history).
        events = [e for e in state(dashboard.url)["events"] if e.get("accessory", {}).get("connectionID") == board]
        assert [(e["kind"], e["accessory"]["connectionID"]) for e in events] == [("connect", board), ("disconnect", board)]
        assert events[1]["eventSeq"] == events[0]["eventSeq"] + 1

        # accmond stops: the host shows offline; it comes back: online, and the rows are accmond's again.
        daemon.stop()
        eventually(lambda: host_status(browser, "bench-7") == "offline", 15, "the host offline")
        daemon.start()
        again = daemon.plug(kind="bluetooth-hid", vendor="046d", product="b342", name="Keys")
        eventually(lambda: host_status(browser, "bench-7") == "online", 30, "the host online again")
        eventually(lambda: rows(browser) == local_truth(daemon) and ("bench-7", again) in rows(browser), 15,
                   "the rows after the restart", show=lambda: f"{rows(browser)} != {local_truth(daemon)}")  # fmt: skip
        assert still_marked(browser)
        kinds = [e["kind"] for e in state(dashboard.url)["events"]]
        assert "offline" in kinds and "online" in kinds
    finally:
        dashboard.close()


def history_entries() -> List[Any]:
    alice = {"client": "accmon", "pid": 4242, "remote": False, "uid": 1000, "user": "alice"}
    board = {"accessoryID": "usb:1209:0001:serial=B1", "connectionID": 1, "kind": "usb", "name": "Board",
             "serialNumber": "B1", "vendorID": "1209", "productID": "0001", "deviceNodes": []}  # fmt: skip
    return [
        {"accessory": board, "eventSeq": 1, "kind": "connect", "seq": 1, "time": 1796000000.1},
        {"accessory": board, "actor": alice, "holder": alice, "kind": "claim", "reason": "flashing", "seq": 2,
         "time": 1796000001.5},
        {"accessory": {**board, "connectionID": 2, "name": "Rogue <script>"}, "kind": "rejected",
         "reason": "no manifest entry", "seq": 3, "time": 1796000002.0},
    ]  # fmt: skip


def test_recent_history_is_shown_once_where_accmon_has_it(browser: Any, daemon: SimulatedDaemon, work: str) -> None:
    fixture = os.path.join(work, "history.ndjson")
    with open(fixture, "w") as out:
        out.write("".join(json.dumps(entry) + "\n" for entry in history_entries()))
    wrapper = os.path.join(work, "accmon")
    with open(wrapper, "w") as out:
        out.write(HISTORY_WRAPPER)
    os.chmod(wrapper, stat.S_IRWXU)
    dashboard = local_dashboard(daemon, wrapper, ACCMON_FIXTURE_HISTORY=fixture, ACCMON_REAL=ACCMON)
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: state(dashboard.url)["source"]["state"] == "connected", 15, "the reader")
        # accmond's first event (sequence number 1), seen live while `accmon history` still runs: the history's
        # entry for it (eventSeq 1) must not show it a second time.
        assert daemon.plug(kind="usb", vendor="1209", product="0001", name="Board", serial="B1") == 1
        eventually(lambda: any(e["kind"] == "claim" for e in state(dashboard.url)["events"]), 15, "the history")
        events = state(dashboard.url)["events"]
        assert [(e["kind"], e.get("history", False)) for e in events] == [
            ("claim", True), ("rejected", True), ("connect", False)], events  # fmt: skip
        assert events[0]["actor"]["user"] == "alice" and events[0]["reason"] == "flashing"
        assert events[2]["eventSeq"] == 1
        eventually(lambda: "Rogue <script>" in browser.find_element("id", "events").text, 15, "the entries shown")
        assert "by alice (uid 1000, pid 4242, accmon)" in browser.find_element("id", "events").text
        # The history counts nothing in /metrics: it is the past, not what this dashboard saw.
        _, _, body = fetch(dashboard.url + "/metrics")
        assert 'accmon_events_total{host="bench-7",kind="claim"} 0' in body.decode()
        assert 'accmon_events_total{host="bench-7",kind="connect"} 1' in body.decode()
    finally:
        dashboard.close()


def test_without_history_the_events_are_those_seen_since_the_start(daemon: SimulatedDaemon) -> None:
    dashboard = local_dashboard(daemon)
    try:
        eventually(lambda: state(dashboard.url)["source"]["state"] == "connected", 15, "the reader")
        assert state(dashboard.url)["events"] == []
        connection = daemon.plug(kind="usb", vendor="1209", product="0002", name="Later")
        eventually(lambda: [e["kind"] for e in state(dashboard.url)["events"]] == ["connect"], 15, "the event")
        assert state(dashboard.url)["events"][0]["accessory"]["connectionID"] == connection
    finally:
        dashboard.close()




def test_a_real_claim_shows_its_holder_live_and_goes_with_its_release(browser: Any, daemon: SimulatedDaemon) -> None:
    import accmon  # the dependency-free client beside the dashboard: a real claim through the real accmond

    board = daemon.plug(kind="usb", vendor="1209", product="0001", name="Board", serial="B1")
    dashboard = local_dashboard(daemon)
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: ("bench-7", board) in rows(browser), 15, "the board's row")
        def holder() -> str:
            return cell_text(browser, "bench-7", board, "col-holder") or ""

        with accmon.Client(socket=daemon.socket) as client, client.claim(board, reason="flashing"):
            eventually(lambda: holder().startswith("root"), 15, "the holder, live", show=holder)
        eventually(lambda: holder() == "–", 15, "the claim gone with its release", show=holder)
        kinds = [e["kind"] for e in state(dashboard.url)["events"]]
        assert "claim" in kinds and "release" in kinds
    finally:
        dashboard.close()
