"""Who may read the dashboard: beyond loopback only with credentials from a file only root and the service may
read (it refuses to start otherwise); with credentials, every path but /healthz needs them; without, only requests
that name a loopback host (no DNS rebinding)."""

from __future__ import annotations

import base64
import os
from typing import Any, Dict

import pytest
from accmon.simulator import SimulatedDaemon
from page import fetch, rows, state
from rig import ACCMON, ACCMOND, DashboardProcess, eventually

TOKEN = "0123456789abcdef0123456789abcdef"
PASSWORD = "correct horse battery staple"


def basic(user: str, password: str) -> Dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def credentials_file(directory: str, mode: int = 0o600) -> str:
    path = os.path.join(directory, "dashboard-auth")
    with open(path, "w") as out:
        out.write(f"# the wall screen\nwall:{PASSWORD}\n{TOKEN}\n")
    os.chmod(path, mode)
    return path


def refused(arguments: list, work: str) -> DashboardProcess:  # type: ignore[type-arg]
    dashboard = DashboardProcess(["--accmon", ACCMON, *arguments], listen=None, wait=False)
    dashboard.wait()
    return dashboard


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", "192.0.2.1:8090"])
def test_beyond_loopback_without_credentials_it_refuses_to_start(listen: str, work: str) -> None:
    dashboard = refused(["--listen", listen], work)
    assert dashboard.process.returncode == 64
    assert "reachable from other machines" in dashboard.log() and "--auth-file" in dashboard.log()


def test_the_same_from_the_configuration_file_names_the_line(work: str) -> None:
    config = os.path.join(work, "dashboard.json")
    with open(config, "w") as out:
        out.write('{\n  // everyone on the network\n  "listen": "0.0.0.0:8090",\n}\n')
    dashboard = refused(["--config", config], work)
    assert dashboard.process.returncode == 65
    assert f"{config}:3:3: listen: '0.0.0.0:8090' is reachable from other machines" in dashboard.log()


@pytest.mark.parametrize("mode, reason", [(0o644, "every user may read or write it (mode 0644)"),
                                          (0o602, "every user may read or write it (mode 0602)"),
                                          (0o620, "its group may write it (mode 0620)")])  # fmt: skip
def test_a_credentials_file_others_may_read_or_write_is_refused(mode: int, reason: str, work: str) -> None:
    path = credentials_file(work, mode)
    dashboard = refused(["--listen", "0.0.0.0:0", "--auth-file", path], work)
    assert dashboard.process.returncode == 77
    assert f"--auth-file: '{path}': {reason}" in dashboard.log()


def test_a_link_to_a_credentials_file_is_refused(work: str) -> None:
    link = os.path.join(work, "link")
    os.symlink(credentials_file(work), link)
    dashboard = refused(["--listen", "0.0.0.0:0", "--auth-file", link], work)
    assert dashboard.process.returncode == 77
    assert "a symbolic link" in dashboard.log()


def test_with_credentials_every_path_but_healthz_needs_them(browser: Any, work: str) -> None:
    with SimulatedDaemon(ACCMOND) as daemon:
        daemon.plug(kind="usb", vendor="1209", product="0001", name="Board")
        dashboard = DashboardProcess(["--socket", daemon.socket, "--host-name", "lab", "--accmon", ACCMON,
                                      "--auth-file", credentials_file(work)], listen="0.0.0.0:0")  # fmt: skip
        try:
            url = dashboard.url.replace("0.0.0.0", "127.0.0.1")
            for path in ("/", "/static/dashboard.js", "/api/state", "/events", "/metrics"):
                status, headers, _ = fetch(url + path)
                assert status == 401, path
                assert headers["WWW-Authenticate"].startswith("Basic realm=")
                assert fetch(url + path, {"Authorization": "Bearer " + TOKEN[:-1] + "0"})[0] == 401
                assert fetch(url + path, basic("wall", PASSWORD + "!"))[0] == 401
                assert fetch(url + path, basic("other", PASSWORD))[0] == 401
            eventually(lambda: fetch(url + "/healthz")[0] == 200, 15, "/healthz without credentials")
            assert state(url, {"Authorization": "Bearer " + TOKEN})["hosts"][0]["name"] == "lab"
            assert state(url, basic("wall", PASSWORD))["rows"][0]["name"] == "Board"
            assert state(url, basic("anyone", TOKEN))["rows"][0]["name"] == "Board"
            # A browser given the basic credentials once follows the live stream with them.
            browser.get(url.replace("http://", f"http://wall:{PASSWORD.replace(' ', '%20')}@") + "/")
            eventually(lambda: len(rows(browser)) == 1, 15, "the row in the authenticated page")
            second = daemon.plug(kind="serial", vendor="0403", product="6001", name="Adapter")
            eventually(lambda: ("lab", second) in rows(browser), 15, "a live row in the authenticated page")
        finally:
            dashboard.close()


def test_without_credentials_only_loopback_host_names_are_answered(work: str) -> None:
    with SimulatedDaemon(ACCMOND) as daemon:
        dashboard = DashboardProcess(["--socket", daemon.socket, "--accmon", ACCMON])
        try:
            port = dashboard.url.rsplit(":", 1)[1]
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost"):
                assert fetch(dashboard.url + "/api/state", {"Host": host})[0] == 200, host
            for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}"):
                status, _, body = fetch(dashboard.url + "/api/state", {"Host": host})
                assert status == 421 and b"localhost" in body, host
        finally:
            dashboard.close()
