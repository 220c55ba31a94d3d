"""The package as pip installs it into a virtual environment made with --system-site-packages (what `make
test-dashboard` does): the ``accmon-dashboard`` script, its static files, Debian's aiohttp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aiohttp
from accmon.simulator import SimulatedDaemon
from page import fetch
from rig import ACCMON, ACCMOND, DASHBOARD_ROOT, eventually


def test_the_installed_script_serves_its_own_static_files(work: str) -> None:
    script = Path(sys.executable).parent / "accmon-dashboard"
    assert script.exists(), f"{script}: not installed: pip install clients/dashboard into this environment first"
    assert aiohttp.__file__.startswith("/usr/lib/python3/dist-packages/"), aiohttp.__file__
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    config = os.path.join(work, "dashboard.json")
    with open(config, "w") as out:
        out.write("{}")
    with SimulatedDaemon(ACCMOND) as daemon:
        log = os.path.join(work, "log")
        with open(log, "w") as err:
            process = subprocess.Popen([str(script), "--config", config, "--listen", "127.0.0.1:0", "--socket",
                                        daemon.socket, "--accmon", ACCMON], stderr=err, env=environment)  # fmt: skip
        try:
            address = eventually(lambda: _address(log), 20, "the installed dashboard to listen")
            for name in ("dashboard.js", "dashboard.css"):
                status, _, body = fetch(f"http://{address}/static/{name}")
                assert status == 200
                assert body == (DASHBOARD_ROOT / "src" / "accmon_dashboard" / "static" / name).read_bytes()
        finally:
            process.terminate()
            assert process.wait(10) == 0


def _address(log: str) -> str:
    with open(log) as text:
        for line in text:
            if " on http://" in line:
                return line.split(" on http://", 1)[1].split("/", 1)[0]
    return ""
