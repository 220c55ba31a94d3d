"""Shared set-up of the dashboard's tests: the tree's Python client on the path (its ``SimulatedDaemon`` plugs
accessories), the binaries checked, and the browser and fleet fixtures (tests/rig.py)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

_REPO = Path(__file__).resolve().parent.parent.parent.parent
sys.path.insert(0, str(_REPO / "clients" / "python" / "src"))

from rig import ACCMON, ACCMOND, BRIDGE, BridgedHost, Mosquitto, chromium  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    missing = [path for path in (ACCMOND, ACCMON, BRIDGE) if not os.access(path, os.X_OK)]
    if missing:
        raise pytest.UsageError(
            f"dashboard tests: {', '.join(missing)}: not built; run `swift build` or set ACCMON_BIN_DIR"
        )
    for tool in ("mosquitto", "/usr/bin/chromium", "/usr/bin/chromedriver"):
        if shutil.which(tool) is None:
            raise pytest.UsageError(f"dashboard tests: no {tool}: run `make deps`")


@pytest.fixture(scope="session")
def chromium_session() -> Iterator[Any]:
    """One headless Chromium for the whole run."""
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium_session: Any) -> Iterator[Any]:
    """The browser, on a blank page with an empty console log; left on a blank page, so that no page of this test
    keeps reconnecting to a dashboard that is gone."""
    chromium_session.get("about:blank")
    chromium_session.get_log("browser")
    yield chromium_session
    chromium_session.get("about:blank")


@pytest.fixture
def work() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="accmon-dashboard-work-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def broker(work: str) -> Iterator[Mosquitto]:
    mosquitto = Mosquitto(work)
    yield mosquitto
    mosquitto.close()


class Fleet:
    """Hosts on one broker; closed at the end of the test."""

    def __init__(self, broker: Mosquitto) -> None:
        self.broker = broker
        self.hosts: List[BridgedHost] = []

    def add(self, name: str, lease: Optional[int] = None) -> BridgedHost:
        host = BridgedHost(name, self.broker.url, lease)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        for host in self.hosts:
            host.close()


@pytest.fixture
def fleet(broker: Mosquitto) -> Iterator[Fleet]:
    group = Fleet(broker)
    yield group
    group.close()
