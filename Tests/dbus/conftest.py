"""Fixtures of the D-Bus tests (busrig.py says what runs): a private bus, accmond on it, and GLib peers."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from busrig import ACCMOND, GLibPeer, PrivateBus, eventually

from accmon.simulator import SimulatedDaemon

#: The manifest of the tests: the u-blox GPS (1546:*) is shown to the members' group and root, the FTDI cable
#: (0403:*) only to www-data and root; root is the admin.
MANIFEST: Dict[str, Any] = {
    "version": 1,
    "admins": {"users": [0]},
    "accessories": [
        {"name": "gps", "match": {"id": "1546:*"}, "protocols": ["com.acme.gps"],
         "access": {"users": [0], "groups": ["users"]}},
        {"name": "cable", "match": {"id": "0403:*"}, "protocols": ["com.acme.cable"],
         "access": {"users": [0, "www-data"]}},
    ],
}  # fmt: skip


@pytest.fixture
def bus() -> Iterator[PrivateBus]:
    private = PrivateBus()
    try:
        yield private
    finally:
        private.close()


def start_daemon(bus: PrivateBus, monkeypatch: pytest.MonkeyPatch, arguments: List[str] = [],
                 manifest: Optional[Dict[str, Any]] = None) -> SimulatedDaemon:  # fmt: skip
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address)
    daemon = SimulatedDaemon(ACCMOND, manifest=manifest or MANIFEST, arguments=["--dbus", *arguments])
    daemon.start()
    wait_for_name(bus, daemon)
    return daemon


def wait_for_name(bus: PrivateBus, daemon: SimulatedDaemon) -> None:
    """Waits until accmond owns its name on `bus`."""
    eventually(
        lambda: bus.busctl("status", "org.accmon.Accmon1").returncode == 0, 15,
        f"accmond to own org.accmon.Accmon1; its log:\n{daemon.log()}",
    )  # fmt: skip


@pytest.fixture
def daemon(bus: PrivateBus, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatedDaemon]:
    started = start_daemon(bus, monkeypatch)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def peers(bus: PrivateBus) -> Iterator[Callable[..., GLibPeer]]:
    """Starts GLib peers on the test bus (``peers(user="www-data", manager=True)``); all are closed at the end."""
    made: List[GLibPeer] = []

    def make(user: Optional[str] = None, member: bool = True, manager: bool = False, groups: List[int] = []) -> GLibPeer:
        peer = GLibPeer(bus, user=user, member=member, manager=manager, groups=groups)
        made.append(peer)
        return peer

    try:
        yield make
    finally:
        for peer in made:
            peer.close()
