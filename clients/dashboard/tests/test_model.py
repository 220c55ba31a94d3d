"""The model alone (no I/O): the lines of ``accmon watch --json`` folded into hosts, rows and events, and the
deltas sent to the pages. Property tests drive a reference fleet at random and print what the fleet reader prints
(FleetState's rules: a changed accessory object is a disconnect and a connect; after a reconnection, the
difference; after a restart, a whole fleet line)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Set, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from accmon_dashboard.model import Model
from accmon_dashboard.records import Delta

Fleet = Dict[str, Dict[str, Any]]  # host -> {"status": status or None, "accessories": {conn: accessory}}


def status(host: str, state: str = "online", reason: Optional[str] = None) -> Dict[str, Any]:
    value = {"bridge": "0.1.0", "host": host, "machineID": "m", "runID": "r", "since": 100.0, "state": state}
    if reason is not None:
        value["reason"] = reason
    return value


def accessory(connection: int, name: str = "x", claim: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    value: Dict[str, Any] = {"connectionID": connection, "kind": "usb", "accessoryID": f"usb:1209:{connection}",
                             "name": name, "vendorID": "1209", "productID": "0001", "deviceNodes": []}  # fmt: skip
    if claim is not None:
        value["claim"] = claim
    return value


def fleet_line(fleet: Fleet) -> Dict[str, Any]:
    return {"type": "fleet", "hosts": [
        {"host": host, "status": entry["status"], "accessories": [entry["accessories"][c] for c in
                                                                    sorted(entry["accessories"])]}
        for host, entry in sorted(fleet.items())]}  # fmt: skip


def difference(old: Fleet, new: Fleet) -> List[Dict[str, Any]]:
    """FleetState.changes(to:): disconnections first, then status changes and connections."""
    gone: List[Dict[str, Any]] = []
    came: List[Dict[str, Any]] = []
    for host in sorted(set(old) | set(new)):
        before, after = old.get(host, {"status": None, "accessories": {}}), new.get(host, {"status": None,
                                                                                           "accessories": {}})  # fmt: skip
        for connection, value in sorted(before["accessories"].items()):
            if after["accessories"].get(connection) != value:
                gone.append({"type": "disconnect", "host": host, "accessory": value})
        if before["status"] != after["status"]:
            came.append({"type": "status", "host": host, "status": after["status"]})
        for connection, value in sorted(after["accessories"].items()):
            if before["accessories"].get(connection) != value:
                came.append({"type": "connect", "host": host, "accessory": value})
    return gone + came


def test_a_fleet_line_then_changes() -> None:
    model = Model("fleet", clock=lambda: 500.0)
    model.apply_fleet([{"type": "fleet", "hosts": [
        {"host": "a", "status": status("a"), "accessories": [accessory(1)]},
        {"host": "b", "status": status("b", "offline", "connection-lost"), "accessories": []}]}])  # fmt: skip
    assert model.events == []  # what was there at the start is no event
    assert model.hosts["a"]["since"] == 100.0
    assert model.hosts["b"]["since"] is None  # offline before the dashboard started: since when is unknown
    delta = model.apply_fleet([{"type": "connect", "host": "a", "accessory": accessory(2)},
                               {"type": "disconnect", "host": "a", "accessory": accessory(1)},
                               {"type": "status", "host": "b", "status": status("b")}])  # fmt: skip
    assert set(model.rows) == {("a", 2)}
    # A disconnect takes effect at the end of its batch (it might be half of a change).
    assert [(e["host"], e["kind"]) for e in model.events] == [("a", "connect"), ("b", "online"), ("a", "disconnect")]
    assert delta.to_json()["removedRows"] == [["a", 1]]
    model.apply_fleet([{"type": "status", "host": "a", "status": status("a", "offline", "connection-lost")}])
    assert model.hosts["a"] == {"name": "a", "state": "offline", "reason": "connection-lost", "machineID": "m",
                                "runID": "r", "bridge": "0.1.0", "since": 500.0}  # fmt: skip
    assert model.event_counts[("a", "offline")] == 1


def test_an_unconfirmed_accessory_stays_marked_until_a_disconnect() -> None:
    model = Model("fleet", clock=lambda: 500.0)
    model.apply_fleet([{"type": "fleet", "hosts": [
        {"host": "a", "status": status("a"), "accessories": [accessory(1), accessory(2)]}]}])  # fmt: skip
    delta = model.apply_fleet([{"type": "unconfirmed", "host": "a", "accessory": accessory(2)}])
    assert set(model.rows) == {("a", 1), ("a", 2)} and model.rows[("a", 2)]["unconfirmed"] is True
    marked = delta.rows[("a", 2)]
    assert marked is not None and marked["unconfirmed"] is True and model.events == []
    model.apply_fleet([{"type": "confirmed", "host": "a", "accessory": accessory(2)}])
    assert "unconfirmed" not in model.rows[("a", 2)]
    model.apply_fleet([{"type": "unconfirmed", "host": "a", "accessory": accessory(1)},
                       {"type": "disconnect", "host": "a", "accessory": accessory(1)}])  # fmt: skip
    assert set(model.rows) == {("a", 2)}
    assert [(e["host"], e["kind"]) for e in model.events] == [("a", "disconnect")]
    assert model.ignored_lines == 0


def test_a_stale_host_is_shown_stale_never_online() -> None:
    """The reader's ``state`` says when an online status's lease ran out: the host is stale, since it was seen so."""
    clock = [500.0]
    model = Model("fleet", clock=lambda: clock[0])
    model.apply_fleet([{"type": "fleet", "hosts": [
        {"host": "a", "state": "online", "status": status("a"), "accessories": [accessory(1)]},
        {"host": "b", "state": "stale", "status": status("b"), "accessories": []}]}])  # fmt: skip
    assert model.hosts["b"]["state"] == "stale" and model.hosts["b"]["since"] is None
    clock[0] = 600.0
    model.apply_fleet([{"type": "status", "host": "a", "state": "stale", "status": status("a")}])
    assert model.hosts["a"] == {"name": "a", "state": "stale", "reason": "its lease ran out: no word from its bridge",
                                "machineID": "m", "runID": "r", "bridge": "0.1.0", "since": 600.0}  # fmt: skip
    assert set(model.rows) == {("a", 1)}, "its accessories stay as last published"
    clock[0] = 700.0
    model.apply_fleet([{"type": "status", "host": "a", "state": "online", "status": status("a")}])
    assert model.hosts["a"]["state"] == "online" and model.hosts["a"]["since"] == 100.0
    assert [(e["host"], e["kind"]) for e in model.events] == [("a", "stale"), ("a", "online")]
    assert model.event_counts[("a", "stale")] == 1
    # A status line of a reader older than the state field: the status alone, as before.
    model.apply_fleet([{"type": "status", "host": "b", "status": status("b")}])
    assert model.hosts["b"]["state"] == "online"


def test_a_changed_object_is_a_claim_or_a_release_not_an_unplug() -> None:
    model = Model("fleet")
    holder = {"user": "alice", "uid": 1000, "pid": 7, "remote": False}
    claim = {"claimID": "c-1", "holder": holder, "since": 10.0}
    model.apply_fleet([{"type": "fleet", "hosts": [{"host": "a", "status": status("a"),
                                                    "accessories": [accessory(1)]}]}])  # fmt: skip
    model.apply_fleet([{"type": "disconnect", "host": "a", "accessory": accessory(1)},
                       {"type": "connect", "host": "a", "accessory": accessory(1, claim=claim)}])  # fmt: skip
    model.apply_fleet([{"type": "disconnect", "host": "a", "accessory": accessory(1, claim=claim)},
                       {"type": "connect", "host": "a", "accessory": accessory(1, name="renamed")}])  # fmt: skip
    assert [e["kind"] for e in model.events] == ["claim", "release"]
    assert model.events[0]["holder"] == holder
    assert model.rows[("a", 1)]["name"] == "renamed"
    # A pair split by a reconnection's ordering (every disconnect first) within one batch is a change too.
    model.apply_fleet(difference({"a": {"status": status("a"), "accessories": {1: accessory(1, name="renamed")}}},
                                 {"a": {"status": status("a"), "accessories": {1: accessory(1, claim=claim)}}}))
    assert [e["kind"] for e in model.events] == ["claim", "release", "claim"]


def test_lines_that_are_not_understood_are_counted_not_fatal() -> None:
    model = Model("fleet")
    model.apply_fleet([None, 3, "x", [], {"type": "fleet", "hosts": 5}, {"type": "connect", "host": "a"},
                       {"type": "connect", "host": "a", "accessory": {"connectionID": -1}},
                       {"type": "connect", "host": 7, "accessory": accessory(1)},
                       {"type": "disconnect", "host": "a", "accessory": accessory(9)}, {"type": "later"}])  # fmt: skip
    assert model.ignored_lines == 10 and model.rows == {}
    model.apply_fleet([{"type": "connect", "host": "a", "accessory": {**accessory(1), "name": ["not", "text"],
                        "deviceNodes": "x", "claim": "no", "vendorID": "v" * 5000}}])  # fmt: skip
    row = model.rows[("a", 1)]
    assert row["name"] == "" and row["deviceNodes"] == [] and "claim" not in row and len(row["vendorID"]) == 1024
    assert model.hosts["a"]["state"] == "offline"  # an accessory topic without a status: the host, offline


def test_local_snapshot_events_offline_and_history() -> None:
    now = [1000.0]
    model = Model("local", max_events=6, clock=lambda: now[0])
    model.apply_local("h", [{"type": "snapshot", "accessories": [accessory(1)], "seq": 7}], online_since=900.0)
    assert model.hosts["h"]["since"] == 900.0 and model.events == []
    model.apply_local("h", [{"type": "connect", "accessory": accessory(2), "seq": 8}])
    model.local_offline("h", "accmond stopped")
    now[0] = 1010.0
    model.local_offline("h", "accmond stopped")  # the same: since stays
    assert model.hosts["h"]["since"] == 1000.0
    model.apply_local("h", [{"type": "snapshot", "accessories": [accessory(2), accessory(3)], "seq": 12}])
    assert set(model.rows) == {("h", 2), ("h", 3)}
    assert [(e["kind"], e.get("eventSeq")) for e in model.events] == [
        ("connect", 8), ("offline", None), ("online", None), ("connect", None), ("disconnect", None)]  # fmt: skip
    model.apply_history("h", [{"kind": "connect", "eventSeq": 8, "time": 999.0, "accessory": accessory(2)},
                              {"kind": "claim", "time": 1005.0, "actor": {"user": "bob", "uid": 5}},
                              {"kind": "rejected", "time": 1.0, "reason": "no entry"}, {"no": "kind"}])  # fmt: skip
    # eventSeq 8 is shown already; by time, the six newest stay (the rejected entry is the oldest).
    assert [e["kind"] for e in model.events] == ["connect", "offline", "claim", "online", "connect", "disconnect"]
    assert model.events[2]["actor"] == {"user": "bob", "uid": 5, "remote": False}
    assert model.ignored_lines == 1
    assert model.event_counts[("h", "claim")] == 0  # the history is shown, not counted


class Mirror:
    """What a page holds: the state it got, then each delta applied (the page's applyDelta, in Python)."""

    def __init__(self, snapshot: Dict[str, Any], max_events: int) -> None:
        self.hosts = {h["name"]: h for h in copy.deepcopy(snapshot["hosts"])}
        self.rows = {(r["host"], r["connectionID"]): r for r in copy.deepcopy(snapshot["rows"])}
        self.events = list(copy.deepcopy(snapshot["events"]))
        self.max_events = max_events

    def apply(self, delta: Delta) -> None:
        message = copy.deepcopy(delta.to_json())
        for host in message["hosts"]:
            self.hosts[host["name"]] = host
        for host, connection in message["removedRows"]:
            self.rows.pop((host, connection), None)
        for row in message["rows"]:
            self.rows[(row["host"], row["connectionID"])] = row
        if "eventsReset" in message:
            self.events = message["eventsReset"]
        self.events = (self.events + message["events"])[-self.max_events :]


operations = st.lists(st.tuples(st.sampled_from(["plug", "unplug", "claim", "release", "online", "offline",
                                                 "forget", "outage", "restart"]),  # fmt: skip
                                st.integers(0, 2), st.integers(0, 10**6)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(operations, st.integers(1, 6), st.data())
def test_random_fleets_rows_and_hosts_equal_the_reference_and_deltas_rebuild_it(
    steps: List[Tuple[str, int, int]], max_events: int, data: st.DataObject
) -> None:
    fleet: Fleet = {}
    shown: Fleet = {}
    next_connection = [1]
    model = Model("fleet", max_events=max_events)
    lines: List[Any] = [fleet_line(fleet)]
    outage = False
    seen_hosts: Set[str] = set()

    def emit(new_lines: List[Any]) -> None:
        lines.extend(new_lines)

    for operation, index, number in steps:
        host = f"h{index}"
        before = copy.deepcopy(fleet)
        entry = fleet.setdefault(host, {"status": None, "accessories": {}})
        connections = sorted(entry["accessories"])
        if operation == "plug":
            entry["accessories"][next_connection[0]] = accessory(next_connection[0], name=f"n{number}")
            next_connection[0] += 1
        elif operation == "unplug" and connections:
            del entry["accessories"][connections[number % len(connections)]]
        elif operation in ("claim", "release") and connections:
            connection = connections[number % len(connections)]
            claim = {"claimID": f"c{number}", "holder": {"user": "u", "remote": True}} if operation == "claim" else None
            entry["accessories"][connection] = accessory(connection, entry["accessories"][connection]["name"], claim)
        elif operation in ("online", "offline"):
            entry["status"] = status(host, operation)
        elif operation == "forget":
            entry["status"] = None
        elif operation == "outage":
            outage = not outage
        elif operation == "restart":
            outage = False
            emit([fleet_line(fleet)])
            shown = copy.deepcopy(fleet)
        if entry["status"] is None and not entry["accessories"] and host not in before:
            del fleet[host]  # FleetState has a host only once a message of it arrived
        if not outage and operation != "restart":
            emit(difference(shown, fleet))
            shown = copy.deepcopy(fleet)
    # The hosts the lines name: the model knows these (FleetState may hold an empty host no line mentions).
    for line in lines:
        seen_hosts |= {entry["host"] for entry in line.get("hosts", [])} | ({line["host"]} if "host" in line else set())

    # The model reads the lines in batches cut anywhere; a page follows from some point on.
    cuts = sorted(data.draw(st.sets(st.integers(0, len(lines)), max_size=8)))
    follow_from = data.draw(st.integers(0, len(cuts)))
    mirror: Optional[Mirror] = None
    start = 0
    for number, cut in enumerate([*cuts, len(lines)]):
        if number == follow_from:
            mirror = Mirror(model.snapshot(), max_events)
        delta = model.apply_fleet(lines[start:cut])
        if mirror is not None:
            mirror.apply(delta)
        start = cut
    expected_rows = {(h, c): v for h, e in shown.items() for c, v in e["accessories"].items()}
    assert {key: (row["name"], "claim" in row) for key, row in model.rows.items()} == {
        key: (value["name"], "claim" in value) for key, value in expected_rows.items()}  # fmt: skip
    for host in seen_hosts:
        reference = shown.get(host, {"status": None})["status"]
        assert model.hosts[host]["state"] == (reference["state"] if reference else "offline"), host
    assert mirror is not None
    snapshot = model.snapshot()
    assert mirror.rows == {(r["host"], r["connectionID"]): r for r in snapshot["rows"]}
    assert mirror.hosts == {h["name"]: h for h in snapshot["hosts"]}
    assert mirror.events == snapshot["events"]


@settings(max_examples=200, deadline=None)
@given(operations)
def test_read_whole_each_change_makes_exactly_its_events(steps: List[Tuple[str, int, int]]) -> None:
    """As the reader writes them (one write per update), every plug and unplug is one event, and a claim or a
    release is never taken for an unplug."""
    model = Model("fleet", max_events=10000)
    fleet: Fleet = {}
    model.apply_fleet([fleet_line(fleet)])
    expected: List[Tuple[str, str]] = []
    connection = 0
    for operation, index, number in steps:
        host = f"h{index}"
        old = copy.deepcopy(fleet)
        entry = fleet.setdefault(host, {"status": status(host), "accessories": {}})
        connections = sorted(entry["accessories"])
        if operation == "plug":
            connection += 1
            entry["accessories"][connection] = accessory(connection)
            expected.append((host, "connect"))
        elif operation == "unplug" and connections:
            del entry["accessories"][connections[number % len(connections)]]
            expected.append((host, "disconnect"))
        elif operation == "claim" and connections:
            chosen = connections[number % len(connections)]
            entry["accessories"][chosen] = accessory(chosen, claim={"claimID": f"c{number}-{len(expected)}"})
            expected.append((host, "claim"))
        elif operation == "release" and connections:
            chosen = connections[number % len(connections)]
            if "claim" in entry["accessories"][chosen]:
                entry["accessories"][chosen] = accessory(chosen)
                expected.append((host, "release"))
        model.apply_fleet(difference(old, fleet))
    # (A host's first status is an "online" event besides.)
    assert [(e["host"], e["kind"]) for e in model.events if e["kind"] != "online"] == expected
