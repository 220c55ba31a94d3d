"""The real parts the dashboard's tests run: mosquitto on a free port, hosts made of a real ``accmond --simulate
--no-udev`` and a real ``accmon-mqtt`` bridge, the dashboard itself as a process, and headless Chromium.

The binaries come from ``ACCMON_BIN_DIR`` (the Makefile passes its debug build directory; by default the tree's
``.build/debug``). Simulated accessories are plugged through accmond's protocol with the Python client's
:class:`accmon.SimulatedDaemon` (clients/python, put on ``sys.path`` by conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from accmon.simulator import SimulatedDaemon

DASHBOARD_ROOT = Path(__file__).resolve().parent.parent
REPO_ROOT = DASHBOARD_ROOT.parent.parent
BIN_DIR = Path(os.environ.get("ACCMON_BIN_DIR") or REPO_ROOT / ".build" / "debug").resolve()
ACCMON = str(BIN_DIR / "accmon")
ACCMOND = str(BIN_DIR / "accmond")
BRIDGE = str(BIN_DIR / "accmon-mqtt")


def eventually(condition: Callable[[], Any], timeout: float = 15.0, what: str = "the condition",
               show: Optional[Callable[[], Any]] = None) -> Any:  # fmt: skip
    """Waits until `condition()` is true and returns it; raises AssertionError naming `what` after `timeout` s (with
    what `show()` returns, when given)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f": {show()}" if show is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: Optional["subprocess.Popen[bytes]"], signal_number: int = signal.SIGTERM) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal_number)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Mosquitto:
    """A broker on a port of its own, without persistence: a restart loses every retained message, and the bridges
    must publish their truth again."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.config = os.path.join(directory, "mosquitto.conf")
        with open(self.config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_type error\n")
        self.process: Optional["subprocess.Popen[bytes]"] = None
        self.start()

    def start(self) -> None:
        with open(os.path.join(self.directory, "mosquitto.log"), "ab") as log:
            self.process = subprocess.Popen(["mosquitto", "-c", self.config], stdout=log, stderr=log)

        def accepting() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False

        eventually(accepting, 10, "mosquitto to listen")

    def kill(self) -> None:
        _stop(self.process, signal.SIGKILL)

    def close(self) -> None:
        _stop(self.process)


class BridgedHost:
    """One host of the fleet: accmond (simulated) and its bridge publishing it as `name`."""

    def __init__(self, name: str, broker: str, lease: Optional[int] = None) -> None:
        """``lease``: the bridge's statusLeaseSeconds (its default when not given)."""
        self.name = name
        self.daemon = SimulatedDaemon(ACCMOND)
        self.daemon.start()
        directory = self.daemon.directory
        self.machine_id = os.path.join(directory, "machine-id")
        with open(self.machine_id, "w") as out:
            out.write(f"m{os.getpid()}{name.encode().hex()}\n")
        self.config = os.path.join(directory, "mqtt.json")
        settings: Dict[str, Any] = {"broker": broker, "host": name, "socket": self.daemon.socket,
                                    "machineIDFile": self.machine_id, "keepAlive": 5}  # fmt: skip
        if lease is not None:
            settings["statusLeaseSeconds"] = lease
        with open(self.config, "w") as out:
            json.dump(settings, out)
        self.log = os.path.join(directory, "bridge.log")
        self.bridge: Optional["subprocess.Popen[bytes]"] = None
        self.start_bridge()

    def start_bridge(self) -> None:
        with open(self.log, "ab") as log:
            self.bridge = subprocess.Popen([BRIDGE, "--config", self.config], stdout=log, stderr=log)

    def kill_bridge(self) -> None:
        """SIGKILL: no goodbye; the broker publishes the bridge's will after 1.5 × keepAlive."""
        _stop(self.bridge, signal.SIGKILL)

    def pause_bridge(self, paused: bool = True) -> None:
        """SIGSTOP (or SIGCONT): the bridge stops speaking, its connection open; its status's lease runs out."""
        assert self.bridge is not None
        self.bridge.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def plug(self, **fields: Any) -> int:
        return int(self.daemon.plug(**fields))

    def unplug(self, connection: int) -> None:
        self.daemon.unplug(connection)

    def truth(self) -> List[Dict[str, Any]]:
        """What accmond says is connected."""
        output = subprocess.run([ACCMON, "--socket", self.daemon.socket, "list", "--json"], check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        accessories: List[Dict[str, Any]] = json.loads(output)["accessories"]
        return accessories

    def close(self) -> None:
        _stop(self.bridge)
        self.daemon.close()


class DashboardProcess:
    """``python -m accmon_dashboard ARGUMENTS`` with this tree's package, on a free port unless told otherwise."""

    def __init__(self, arguments: List[str], listen: Optional[str] = "127.0.0.1:0",
                 environment: Optional[Dict[str, str]] = None, wait: bool = True) -> None:  # fmt: skip
        self.directory = tempfile.mkdtemp(prefix="accmon-dashboard-test-")
        self.log_path = os.path.join(self.directory, "dashboard.log")
        # A configuration of its own, empty unless the test names one: never the machine's /etc/accmon/dashboard.json.
        config = os.path.join(self.directory, "dashboard.json")
        with open(config, "w") as out:
            out.write("{}\n")
        command = [sys.executable, "-m", "accmon_dashboard"]
        command += [*(["--config", config] if "--config" not in arguments else [])]
        command += [*(["--listen", listen] if listen else []), *arguments]
        env = dict(os.environ, PYTHONPATH=str(DASHBOARD_ROOT / "src"), PYTHONDONTWRITEBYTECODE="1")
        env.update(environment or {})
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=env, stdin=subprocess.DEVNULL)
        self.url = ""
        if wait:
            found = eventually(lambda: self._address() or self.process.poll() is not None, 20, "the dashboard to listen")
            if self.process.poll() is not None:
                raise AssertionError(f"the dashboard exited with {self.process.returncode}:\n{self.log()}")
            self.url = f"http://{found}"

    def _address(self) -> Optional[str]:
        match = re.search(r"on http://(\S+)/ ", self.log())
        return match.group(1) if match else None

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            return log.read()

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout)

    def close(self) -> None:
        _stop(self.process)


def chromium(width: int = 1400, height: int = 900) -> Any:
    """Headless Chromium driven by chromedriver (the options verified in NOTES-platform.md)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--lang=en-US"):  # fmt: skip
        options.add_argument(argument)  # type: ignore[no-untyped-call]
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
