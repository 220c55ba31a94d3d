"""The page in a real headless Chromium, against the real dashboard, a real mosquitto, real accmond and real
bridges: rows come and go live, a host whose bridge is killed shows offline, an accessory's name is text, the
Content-Security-Policy is there and bites, and the page recovers when the broker or the dashboard comes back."""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from conftest import Fleet
from page import banner, cell_text, fetch, host_status, mark_page, metric_families, rows, still_marked, truth_keys
from rig import ACCMON, DashboardProcess, Mosquitto, eventually, free_port

HOSTILE_NAME = "<img src=x onerror=\"document.title='pwned';window.__pwned=1\">"


def fleet_dashboard(broker: Mosquitto, *arguments: str, listen: str = "127.0.0.1:0") -> DashboardProcess:
    return DashboardProcess(["--broker", broker.url, "--accmon", ACCMON, *arguments], listen=listen)


def screenshot_path() -> str:
    return os.environ.get("ACCMON_DASHBOARD_SCREENSHOT") or os.path.join(tempfile.gettempdir(), "accmon-dashboard.png")


def test_rows_come_and_go_live_and_a_killed_bridge_shows_offline(browser: Any, fleet: Fleet) -> None:
    lab1, lab2, kiosk = fleet.add("lab-1"), fleet.add("lab-2"), fleet.add("kiosk-12")
    lab1.plug(kind="serial", vendor="0403", product="6001", name="FT232R USB UART", serial="A50285BI",
              nodes=["/dev/ttyUSB0"])  # fmt: skip
    scanner = lab1.plug(kind="usb", vendor="05e0", product="1200", name="Barcode scanner", serial="S-77",
                        nodes=["/dev/bus/usb/001/004"])  # fmt: skip
    kiosk.plug(kind="usb", vendor="0c27", product="3bfa", name="Card reader", serial="CR-12",
               nodes=["/dev/bus/usb/001/002"])  # fmt: skip
    dashboard = fleet_dashboard(fleet.broker)
    try:
        eventually(lambda: {h["name"] for h in _state(dashboard)["hosts"]} == {"lab-1", "lab-2", "kiosk-12"}, 20,
                   "the three hosts")  # fmt: skip
        browser.get(dashboard.url + "/")
        mark_page(browser)
        truth = truth_keys(lab1, lab2, kiosk)
        eventually(lambda: rows(browser) == truth, 15, f"the rows {truth}")
        assert host_status(browser, "lab-2") == "online"

        # A plug and an unplug reach the page without a reload.
        keys = lab2.plug(kind="bluetooth-hid", vendor="046d", product="b342", name="Keys-To-Go",
                         nodes=["/dev/input/event7"])  # fmt: skip
        eventually(lambda: ("lab-2", keys) in rows(browser), 15, "the new row of lab-2")
        lab1.unplug(scanner)
        eventually(lambda: ("lab-1", scanner) not in rows(browser), 15, "the unplugged row to leave")
        eventually(lambda: rows(browser) == truth_keys(lab1, lab2, kiosk), 15, "the rows to equal the truth")

        # A device that names itself with markup: shown as those characters, nothing runs, no element is made.
        hostile = kiosk.plug(kind="usb", vendor="1209", product="0bad", name=HOSTILE_NAME, serial="<b>x</b>")
        eventually(lambda: cell_text(browser, "kiosk-12", hostile, "col-name") == HOSTILE_NAME, 15,
                   "the hostile name, as text")  # fmt: skip
        assert cell_text(browser, "kiosk-12", hostile, "col-serial") == "<b>x</b>"
        assert browser.execute_script("return document.querySelectorAll('img, b').length;") == 0
        assert browser.execute_script("return window.__pwned === undefined;")
        assert browser.title != "pwned"
        events = browser.find_element("id", "events").text
        assert HOSTILE_NAME in events

        # The kiosk's bridge dies without a goodbye: the broker publishes its will, the page shows it offline.
        kiosk.kill_bridge()
        eventually(lambda: host_status(browser, "kiosk-12") == "offline", 20, "kiosk-12 to show offline")
        assert host_status(browser, "lab-1") == "online"
        assert "offline" in browser.find_element("id", "events").text
        assert still_marked(browser), "the page was reloaded"
        browser.execute_script("document.getElementById('filter').blur();")
        browser.save_screenshot(screenshot_path())
        severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        dashboard.close()


def test_every_response_carries_the_policy_and_it_forbids_inline_script(browser: Any, fleet: Fleet) -> None:
    fleet.add("lab-1")
    dashboard = fleet_dashboard(fleet.broker)
    try:
        expected = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                    "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")  # fmt: skip
        for path in ("/", "/static/dashboard.js", "/static/dashboard.css", "/api/state", "/metrics", "/healthz",
                     "/no-such-page"):  # fmt: skip
            status, headers, _ = fetch(dashboard.url + path)
            assert status in (200, 404, 503), (path, status)
            assert headers.get("Content-Security-Policy") == expected, path
            assert headers.get("X-Content-Type-Options") == "nosniff", path
        status, _, body = fetch(dashboard.url + "/")
        page = body.decode()
        assert re.search(r"<script\b", page) and not re.search(r"<script(?![^>]*\ssrc=)", page), "an inline script"
        assert not re.search(r"\son[a-z]+\s*=", page, re.IGNORECASE), "an event handler attribute"
        assert not re.search(r"<style\b|\sstyle\s*=", page, re.IGNORECASE), "inline style"
        assert fetch(dashboard.url + "/", method="POST")[0] == 405
        # The policy holds in the browser: a script element added to the page does not run.
        browser.get(dashboard.url + "/")
        eventually(lambda: banner(browser) == "connected", 15, "the page to be live")
        browser.execute_script("""const s = document.createElement('script');
            s.textContent = 'window.__inline = 1'; document.body.append(s);""")
        assert browser.execute_script("return window.__inline === undefined;")
        violations = [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
        assert violations, "the browser reported no CSP violation for the inline script"
    finally:
        dashboard.close()


def test_the_page_recovers_after_the_broker_and_the_dashboard_restart(browser: Any, fleet: Fleet) -> None:
    host = fleet.add("lab-1")
    first = host.plug(kind="usb", vendor="1209", product="0001", name="before")
    port = free_port()
    dashboard = fleet_dashboard(fleet.broker, listen=f"127.0.0.1:{port}")
    try:
        browser.get(dashboard.url + "/")
        mark_page(browser)
        eventually(lambda: rows(browser) == {("lab-1", first)}, 15, "the first row")

        # The broker dies and comes back empty (no persistence): the reader says so, then reads the bridge's truth.
        fleet.broker.kill()
        eventually(lambda: banner(browser) in ("reconnecting", "down"), 15, "the page to say the broker is lost")
        fleet.broker.start()
        eventually(lambda: banner(browser) == "connected", 30, "the page to be live again")
        second = host.plug(kind="serial", vendor="0403", product="6001", name="after broker")
        eventually(lambda: rows(browser) == {("lab-1", first), ("lab-1", second)}, 20, "the rows after the broker")
        eventually(lambda: host_status(browser, "lab-1") == "online", 20, "lab-1 online again")

        # The dashboard itself stops and starts again on the same port: the page connects again by itself.
        dashboard.close()
        eventually(lambda: banner(browser) == "connecting", 15, "the page to notice the dashboard is gone")
        host.unplug(first)
        dashboard = fleet_dashboard(fleet.broker, listen=f"127.0.0.1:{port}")
        eventually(lambda: rows(browser) == {("lab-1", second)}, 30, "the rows from the new dashboard")
        eventually(lambda: banner(browser) == "connected", 15, "the page live on the new dashboard")
        assert still_marked(browser), "the page was reloaded"
    finally:
        dashboard.close()


def _state(dashboard: DashboardProcess) -> Any:
    status, _, body = fetch(dashboard.url + "/api/state")
    return json.loads(body) if status == 200 else {"hosts": []}


def test_a_dashboard_started_before_the_broker_waits_for_it(browser: Any, fleet: Fleet) -> None:
    fleet.broker.kill()
    dashboard = fleet_dashboard(fleet.broker)
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: banner(browser) == "down", 15, "the page to say the reader stopped")
        assert "starting it again in" in browser.find_element("id", "connection").text
        assert fetch(dashboard.url + "/healthz")[0] == 503
        fleet.broker.start()
        host = fleet.add("late-1")
        connection = host.plug(kind="usb", vendor="1209", product="0001", name="late")
        eventually(lambda: rows(browser) == {("late-1", connection)}, 30, "the row once the broker is up")
        assert banner(browser) == "connected" and fetch(dashboard.url + "/healthz")[0] == 200
    finally:
        dashboard.close()


def test_a_host_whose_lease_runs_out_is_stale_on_the_page_and_in_the_metrics(browser: Any, fleet: Fleet) -> None:
    """A bridge that stops speaking without a will (SIGSTOP: its connection stays open) lets its status's 3-second
    lease run out: the page shows the host stale (never online), /metrics has accmon_host_stale 1 and
    accmon_host_online 0, and an event says so; when the bridge speaks again, the host is online again."""
    lab1, lab2 = fleet.add("lab-1", lease=3), fleet.add("lab-2", lease=3)
    board = lab1.plug(kind="usb", vendor="1209", product="0001", name="board")
    dashboard = fleet_dashboard(fleet.broker)
    try:
        browser.get(dashboard.url + "/")
        eventually(lambda: rows(browser) == {("lab-1", board)}, 20, "the row of lab-1")
        eventually(lambda: host_status(browser, "lab-2") == "online", 20, "lab-2 online")
        lab1.pause_bridge()
        eventually(lambda: host_status(browser, "lab-1") == "stale", 15, "lab-1 stale")
        assert host_status(browser, "lab-2") == "online", "renewed leases keep a host online"
        samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                   for family in metric_families(fetch(dashboard.url + "/metrics")[2].decode())
                   for sample in family.samples}  # fmt: skip
        assert samples[("accmon_host_stale", (("host", "lab-1"),))] == 1
        assert samples[("accmon_host_online", (("host", "lab-1"),))] == 0
        assert samples[("accmon_host_stale", (("host", "lab-2"),))] == 0
        assert samples[("accmon_events_total", (("host", "lab-1"), ("kind", "stale")))] == 1
        state = _state(dashboard)
        assert [h["reason"] for h in state["hosts"] if h["name"] == "lab-1"] == ["its lease ran out: no word from "
                                                                                "its bridge"]  # fmt: skip
        assert rows(browser) == {("lab-1", board)}, "its accessories stay as last published"
        lab1.pause_bridge(False)
        eventually(lambda: host_status(browser, "lab-1") == "online", 15, "lab-1 online again")
    finally:
        lab1.pause_bridge(False)
        dashboard.close()
