"""The page from the keyboard, on a phone and on a wall screen, in the real browser against the real server. The
reader is a fixture ``accmon`` that prints a fleet line (what ``accmon watch --broker --json`` prints): the layout
does not depend on where the state comes from."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, Optional

import pytest
from page import rows
from rig import DashboardProcess, eventually
from selenium.webdriver.common.keys import Keys
from test_claims import accessory, status, write_reader

HOSTS = ["lab-1", "lab-2", "kiosk-12"]


@pytest.fixture
def dashboard(work: str) -> Iterator[DashboardProcess]:
    lines = os.path.join(work, "lines.ndjson")
    hosts: List[Dict[str, Any]] = [
        {"host": name, "status": status(name), "accessories": [accessory(index * 10 + n, f"{name} board {n}")
                                                                for n in range(1, 4)]}
        for index, name in enumerate(HOSTS)]  # fmt: skip
    with open(lines, "w") as out:
        out.write(json.dumps({"type": "fleet", "hosts": hosts}) + "\n")
    process = DashboardProcess(["--broker", "mqtt://fixture.invalid", "--accmon", write_reader(work), "--title",
                                "Lab <3>"], environment={"ACCMON_FIXTURE_LINES": lines})  # fmt: skip
    yield process
    process.close()


def visible_rows(browser: Any) -> List[str]:
    return list(browser.execute_script(
        "return Array.from(document.querySelectorAll('#accessories tbody tr:not([hidden])'), (tr) => tr.dataset.host);"
    ))  # fmt: skip


def test_the_keyboard_filters_and_clears(browser: Any, dashboard: DashboardProcess) -> None:
    browser.get(dashboard.url + "/")
    eventually(lambda: len(rows(browser)) == 9, 15, "the nine rows")
    assert browser.title == "Lab <3>" and browser.find_element("id", "title").text == "Lab <3>"
    body = browser.find_element("tag name", "body")
    body.send_keys("/")
    focused = browser.switch_to.active_element
    assert focused.get_attribute("id") == "filter"
    focused.send_keys("kiosk b22")
    eventually(lambda: visible_rows(browser) == ["kiosk-12"], 5, "one row for 'kiosk b22'")
    assert browser.execute_script("return location.hash;") == "#filter=kiosk%20b22"
    assert browser.find_element("id", "accessory-count").text == "1 of 9"
    focused.send_keys(Keys.ESCAPE)
    eventually(lambda: len(visible_rows(browser)) == 9, 5, "every row again after Esc")
    # Tab from the filter reaches the table region; the host buttons come earlier, before the filter.
    focused = browser.switch_to.active_element
    focused.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("class") == "table-wrap"
    browser.execute_script("document.querySelector('.skip').focus();")
    for _ in range(10):
        active = browser.switch_to.active_element
        if active.get_attribute("class") == "host-name" and active.text == "lab-2":
            break
        active.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.text == "lab-2"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    eventually(lambda: set(visible_rows(browser)) == {"lab-2"}, 5, "lab-2's rows after Enter on its button")
    assert browser.switch_to.active_element.get_attribute("aria-pressed") == "true"
    # A filter in the address is applied on load (a wall screen's bookmark).
    browser.get(dashboard.url + "/#filter=lab-1")
    eventually(lambda: set(visible_rows(browser)) == {"lab-1"} and len(visible_rows(browser)) == 3, 15,
               "lab-1's rows from the address")  # fmt: skip


def test_a_phone_gets_labelled_cards_and_a_wall_screen_bigger_text(browser: Any, dashboard: DashboardProcess) -> None:
    try:
        browser.set_window_size(390, 844)
        browser.get(dashboard.url + "/")
        eventually(lambda: len(rows(browser)) == 9, 15, "the nine rows")
        layout = browser.execute_script("""const td = document.querySelector('#accessories tbody td.col-name');
            return {row: getComputedStyle(td.parentElement).display, label: getComputedStyle(td, '::before').content,
                    overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
                    width: innerWidth};""")
        assert layout["width"] <= 400, layout
        assert layout["row"] == "block" and layout["label"] == '"Name"', layout
        assert layout["overflow"] <= 0, f"the phone scrolls sideways by {layout['overflow']} px"
        browser.set_window_size(2560, 1440)
        browser.get(dashboard.url + "/")
        eventually(lambda: len(rows(browser)) == 9, 15, "the nine rows")

        def measure() -> Dict[str, Any]:
            return dict(browser.execute_script("""const left = (cells) => Array.from(cells, (c) => Math.round(c.getBoundingClientRect().left));
                return {font: getComputedStyle(document.documentElement).fontSize,
                columns: getComputedStyle(document.querySelector('main')).gridTemplateColumns.split(' ').length,
                row: getComputedStyle(document.querySelector('#accessories tbody tr')).display,
                headers: left(document.querySelectorAll('#accessories th')),
                first: left(document.querySelectorAll('#accessories tbody tr td')),
                last: left(document.querySelectorAll('#accessories tbody:last-of-type tr:last-child td'))};"""))

        # Every row is its own grid with the same column template: the columns line up under their headers, once
        # the page has laid out the rows it was given after the resize (a measure during it saw the first cell at 0).
        def aligned() -> Optional[Dict[str, Any]]:
            wall = measure()
            return wall if wall["headers"] == wall["first"][:8] == wall["last"] else None

        wall = eventually(aligned, 5, "the columns under their headers", show=measure)
        assert (wall["font"], wall["columns"], wall["row"]) == ("20px", 2, "grid"), wall
        # And the markup keeps the table's roles for assistive technology.
        table = browser.find_element("id", "accessories")
        assert table.aria_role == "table"
        assert table.find_element("css selector", "tbody tr").aria_role == "row"
        assert table.find_element("css selector", "tbody td").aria_role == "cell"
        assert table.find_element("css selector", "th").aria_role == "columnheader"
    finally:
        browser.set_window_size(1400, 900)


def test_dark_when_the_system_asks(browser: Any, dashboard: DashboardProcess) -> None:
    browser.get(dashboard.url + "/")
    eventually(lambda: len(rows(browser)) == 9, 15, "the nine rows")
    background = "return getComputedStyle(document.documentElement).backgroundColor;"
    light = browser.execute_script(background)
    try:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})  # fmt: skip
        assert (light, browser.execute_script(background)) == ("rgb(246, 247, 249)", "rgb(17, 19, 24)")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
