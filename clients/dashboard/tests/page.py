"""Reading the dashboard's page in the browser through its stable hooks: the table ``#accessories`` with one
``<tr data-host data-connection>`` per connected accessory, and one ``[data-host-status="<host>"]`` per host."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Dict, List, Optional, Set, Tuple

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

ROWS = """return Array.from(document.querySelectorAll('#accessories tbody tr'),
    (tr) => [tr.getAttribute('data-host'), tr.getAttribute('data-connection')]);"""
STATUS = """const node = document.querySelector('[data-host-status="' + CSS.escape(arguments[0]) + '"]');
    return node ? node.textContent : null;"""


def rows(browser: Any) -> Set[Tuple[str, int]]:
    """The rows of ``#accessories``, as (host, connection id)."""
    return {(host, int(connection)) for host, connection in browser.execute_script(ROWS)}


def host_status(browser: Any, host: str) -> Optional[str]:
    """The text of the host's ``[data-host-status]`` element."""
    value = browser.execute_script(STATUS, host)
    return None if value is None else str(value)


def banner(browser: Any) -> str:
    """The connection banner's state: connecting, starting, connected, reconnecting, down."""
    return str(browser.execute_script("return document.getElementById('connection').dataset.state;"))


def mark_page(browser: Any) -> None:
    """Marks the loaded document: a reload (or a navigation) would lose the mark."""
    browser.execute_script("window.__accmonTestMark = 'not reloaded';")


def still_marked(browser: Any) -> bool:
    return bool(browser.execute_script("return window.__accmonTestMark === 'not reloaded';"))


def cell_text(browser: Any, host: str, connection: int, column: str) -> Optional[str]:
    """The text of a row's cell (``col-name``, ``col-holder``...)."""
    script = """const tr = document.querySelector('#accessories tr[data-host="' + CSS.escape(arguments[0]) +
        '"][data-connection="' + arguments[1] + '"]');
        const td = tr && tr.querySelector('td.' + arguments[2]);
        return td ? td.textContent : null;"""
    value = browser.execute_script(script, host, str(connection), column)
    return None if value is None else str(value)


def fetch(url: str, headers: Optional[Dict[str, str]] = None, method: str = "GET") -> Tuple[int, Dict[str, str], bytes]:
    """An HTTP request; returns the status, the headers and the body (also for error statuses)."""
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def state(url: str, headers: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    status, _, body = fetch(url + "/api/state", headers)
    assert status == 200, body
    value: Dict[str, Any] = json.loads(body)
    return value


def truth_keys(*hosts: Any) -> Set[Tuple[str, int]]:
    """What the hosts' accmonds say is connected, as (host, connection id)."""
    return {(host.name, accessory["connectionID"]) for host in hosts for accessory in host.truth()}


def metric_families(text: str) -> List[Metric]:
    """The families of a Prometheus text exposition, read by prometheus_client's parser."""
    return list(text_string_to_metric_families(text))  # type: ignore[no-untyped-call]
