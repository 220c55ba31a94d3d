"""Claims (check-out) as the page and /metrics show them, through the real server and the real browser: first with
fixture data, the reader being a fixture ``accmon`` (``--accmon``) that prints what ``accmon watch --broker --json``
prints for a fleet whose accessories carry a ``claim`` (issues 27/28), then what the test appends to its file; then
with the real reader, from retained claim topics on a real mosquitto (docs/MQTT.md §12)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from page import cell_text, fetch, metric_families, rows
from rig import ACCMON, DashboardProcess, Mosquitto, eventually

SINCE = 1796000000.1
ALICE = {"client": "flasher", "pid": 4242, "remote": False, "uid": 1000, "user": "alice"}
FIXTURE_READER = """#!{python}
# A fixture accmon: prints the lines of $ACCMON_FIXTURE_LINES, then the lines appended to it, like tail -f; the
# complete lines it finds at once in one write, as accmon watch writes the lines of one change (a claim's
# disconnect and connect pair) together.
import os, sys, time
path = os.environ["ACCMON_FIXTURE_LINES"]
pending = ""
with open(path) as lines:
    while True:
        pending += lines.read()
        complete, newline, pending = pending.rpartition("\\n")
        if newline:
            sys.stdout.write(complete + newline)
            sys.stdout.flush()
        else:
            pending = complete + pending
            time.sleep(0.02)
"""


def accessory(connection: int, name: str, claim: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    value: Dict[str, Any] = {
        "accessoryID": f"usb:1209:000{connection}:serial=B{connection}", "connectionID": connection,
        "descriptorsSHA256": "", "deviceNodes": [f"/dev/ttyACM{connection}"], "firmwareRevision": "",
        "hardwareRevision": "", "interfaceNumber": "", "kind": "usb", "manufacturer": "", "modelNumber": "",
        "name": name, "portPath": "", "productID": f"000{connection}", "protocolStrings": [],
        "serialNumber": f"B{connection}", "sysfsPath": "", "vendorID": "1209",
    }  # fmt: skip
    if claim is not None:
        value["claim"] = claim
    return value


def status(host: str) -> Dict[str, Any]:
    return {"bridge": "0.1.0", "host": host, "machineID": "m1", "runID": "r1", "since": SINCE - 50, "state": "online"}


def write_reader(directory: str) -> str:
    path = os.path.join(directory, "accmon")
    with open(path, "w") as out:
        out.write(FIXTURE_READER.format(python=sys.executable))
    os.chmod(path, stat.S_IRWXU)
    return path


def append(path: str, lines: List[Dict[str, Any]]) -> None:
    with open(path, "a") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")


def claims_metric(url: str) -> Dict[str, float]:
    _, _, body = fetch(url + "/metrics")
    values: Dict[str, float] = {}
    for family in metric_families(body.decode()):
        if family.name == "accmon_claims":
            for sample in family.samples:
                values[sample.labels["host"]] = sample.value
    return values


def test_the_holder_and_since_of_a_claim_show_and_change_live(browser: Any, work: str) -> None:
    lines = os.path.join(work, "lines.ndjson")
    claimed = {"claimID": "c-3", "holder": ALICE, "since": SINCE, "reason": "flashing", "waiting": 1}
    board, probe = accessory(1, "Board", claimed), accessory(2, "Probe")
    append(lines, [{"type": "fleet", "hosts": [{"host": "lab-1", "state": "online", "status": status("lab-1"),
                                                 "accessories": [board, probe]}]}])  # fmt: skip
    dashboard = DashboardProcess(["--broker", "mqtt://fixture.invalid", "--accmon", write_reader(work)],
                                 environment={"ACCMON_FIXTURE_LINES": lines})  # fmt: skip
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: rows(browser) == {("lab-1", 1), ("lab-1", 2)}, 15, "the two rows")
        assert cell_text(browser, "lab-1", 1, "col-holder") == "alice (uid 1000, pid 4242, flasher)1 waiting"
        assert cell_text(browser, "lab-1", 2, "col-holder") == "–"
        since = browser.execute_script(
            "return document.querySelector('#accessories tr[data-connection=\"1\"] td.col-since time').dateTime;")
        assert since == time.strftime("%Y-%m-%dT%H:%M:%S.100Z", time.gmtime(SINCE))
        assert claims_metric(dashboard.url) == {"lab-1": 1}

        # The claim is released and another taken by a remote user: the reader prints each as a disconnect of the
        # old object and a connect of the new one, with the same connection id. Neither is an unplug.
        remote = {"claimID": "c-4", "holder": {"remote": True, "user": "ci"}, "since": SINCE + 60}
        append(lines, [{"type": "disconnect", "host": "lab-1", "accessory": board},
                       {"type": "connect", "host": "lab-1", "accessory": accessory(1, "Board")},
                       {"type": "disconnect", "host": "lab-1", "accessory": probe},
                       {"type": "connect", "host": "lab-1", "accessory": accessory(2, "Probe", remote)}])  # fmt: skip
        eventually(lambda: cell_text(browser, "lab-1", 2, "col-holder") == "ci (remote)", 15, "the remote holder")
        assert cell_text(browser, "lab-1", 1, "col-holder") == "–"
        events = browser.find_element("id", "events").text
        assert "release" in events and "holder alice (uid 1000, pid 4242, flasher)" in events
        assert "claim" in events and "holder ci (remote)" in events
        assert_one_release_and_one_claim(browser, dashboard)
    finally:
        dashboard.close()


def assert_one_release_and_one_claim(browser: Any, dashboard: DashboardProcess) -> None:
    """After a claim released and another taken on lab-1's two accessories: the page's events are one release and
    one claim (neither an unplug), both rows stay, and /metrics counts one claim."""
    kinds = browser.execute_script("return Array.from(document.querySelectorAll('#events li'), (li) => li.dataset.kind);")
    assert sorted(kinds) == ["claim", "release"], kinds
    assert rows(browser) == {("lab-1", 1), ("lab-1", 2)}
    assert claims_metric(dashboard.url) == {"lab-1": 1}


def publish_retained(broker: Mosquitto, topic: str, payload: Optional[Dict[str, Any]]) -> None:
    """Publishes `payload` (compact JSON) retained on `topic`; `None` deletes the retained message."""
    message = ["-n"] if payload is None else ["-m", json.dumps(payload, separators=(",", ":"), sort_keys=True)]
    subprocess.run(["mosquitto_pub", "-p", str(broker.port), "-q", "1", "-r", "-t", topic, *message], check=True)


def claim_state(host: str, value: Dict[str, Any], claim: Dict[str, Any]) -> Dict[str, Any]:
    """The retained payload of a claim topic, as the bridge publishes it."""
    return {"accessoryID": value["accessoryID"], "connectionID": value["connectionID"], "host": host,
            "reason": "", "state": "held", "waiting": 0, **claim}  # fmt: skip


def test_retained_claims_through_the_real_reader_show_and_change_live(browser: Any, work: str) -> None:
    broker = Mosquitto(work)
    board, probe = accessory(1, "Board"), accessory(2, "Probe")
    publish_retained(broker, "accmon/lab-1/status", {**status("lab-1"), "retained": {"accessories": 2}})
    for value in (board, probe):
        publish_retained(broker, f"accmon/lab-1/accessories/{value['accessoryID']}/{value['connectionID']}", value)
    board_claim = f"accmon/lab-1/claims/{board['accessoryID']}/1"
    probe_claim = f"accmon/lab-1/claims/{probe['accessoryID']}/2"
    claimed = {"claimID": "c-3", "holder": ALICE, "since": SINCE, "reason": "flashing", "waiting": 1}
    publish_retained(broker, board_claim, claim_state("lab-1", board, claimed))
    dashboard = DashboardProcess(["--broker", broker.url, "--accmon", ACCMON])
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: rows(browser) == {("lab-1", 1), ("lab-1", 2)}, 15, "the two rows")
        eventually(lambda: cell_text(browser, "lab-1", 1, "col-holder") == "alice (uid 1000, pid 4242, flasher)1 waiting",
                   15, "the holder of the retained claim")  # fmt: skip
        assert cell_text(browser, "lab-1", 2, "col-holder") == "–"
        assert claims_metric(dashboard.url) == {"lab-1": 1}

        # The bridge deletes one claim topic and publishes another: the page follows, without a reload.
        publish_retained(broker, board_claim, None)
        remote = {"claimID": "c-4", "holder": {"remote": True, "user": "ci"}, "since": SINCE + 60}
        publish_retained(broker, probe_claim, claim_state("lab-1", probe, remote))
        eventually(lambda: cell_text(browser, "lab-1", 2, "col-holder") == "ci (remote)", 15, "the remote holder")
        eventually(lambda: cell_text(browser, "lab-1", 1, "col-holder") == "–", 15, "the released board")
        assert_one_release_and_one_claim(browser, dashboard)
    finally:
        dashboard.close()
        broker.close()
