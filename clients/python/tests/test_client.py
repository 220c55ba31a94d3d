"""The blocking client against a real accmond: list, status, events, and wait_for (present, arriving, timeout)."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import accmon
from accmon.simulator import SimulatedDaemon


def plug_later(daemon: SimulatedDaemon, delay: float, **accessory: object) -> threading.Thread:
    def plug() -> None:
        time.sleep(delay)
        with accmon.Client(daemon.socket) as client:
            client.simulate_connect(**accessory)  # type: ignore[arg-type]

    thread = threading.Thread(target=plug)
    thread.start()
    return thread


def test_list_and_status_share_one_connection(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="serial", vendor="0403", product="6001", name="Adapter", nodes=["/dev/ttyUSB0"])
    accmond.plug(kind="usb", vendor="1209", name="Stick")
    with accmon.Client(client_name="script") as client:  # ACCMON_SOCKET, set by the fixture
        assert client.socket_path == accmond.socket
        assert [a.name for a in client.list()] == ["Adapter", "Stick"]
        assert [a.name for a in client.list(kind="usb", vendor=0x1209)] == ["Stick"]
        status = client.status()
        assert status.connected_accessories == 2
        assert [c["clientName"] for c in status.clients if c["clientName"] == "script"] == ["script"]
        assert status.sessions == 2  # this connection and the fixture's
        assert client.list().seq == 2


def test_events_is_a_generator_from_now_on_that_closes_its_connection(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="usb", vendor="1209", name="Before")
    with accmon.Client() as client:
        events = client.events(vendor="1209")
        first = accmond.plug(kind="usb", vendor="1209", name="First")
        accmond.plug(kind="usb", vendor="0781", name="Other vendor")
        accmond.unplug(first)
        seen: List[accmon.AccessoryEvent] = []
        for event in events:
            seen.append(event)
            if len(seen) == 2:
                break
        assert [(e.change, e.accessory.name) for e in seen] == [("connect", "First"), ("disconnect", "First")]
        events.close()  # type: ignore[attr-defined]
        assert client.status().sessions == 2  # the generator's connection is gone


def test_subscribe_gives_the_snapshot_and_next_event_times_out(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="serial", vendor="0403", name="Adapter")
    with accmon.Client().subscribe(kind="serial") as subscription:
        assert [a.name for a in subscription.snapshot] == ["Adapter"]
        started = time.monotonic()
        assert subscription.next_event(timeout=0.2) is None
        assert 0.19 <= time.monotonic() - started < 2
        accmond.plug(kind="serial", vendor="0403", name="Second")
        event = subscription.next_event(timeout=5)
        assert event is not None and event.accessory.name == "Second"


def test_wait_for_returns_at_once_when_one_is_connected(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="usb", vendor="0403", name="USB side")
    first = accmond.plug(kind="serial", vendor="0403", product="6001", serial="A", nodes=["/dev/ttyUSB0"])
    accmond.plug(kind="serial", vendor="0403", product="6001", serial="B", nodes=["/dev/ttyUSB1"])
    with accmon.Client() as client:
        started = time.monotonic()
        found = client.wait_for(kind="serial", vendor="0403", timeout=0)
        assert time.monotonic() - started < 1
        assert (found.connection_id, found.device_node) == (first, "/dev/ttyUSB0")  # the first in connection order
        assert client.wait_for(kind="serial", serial="B").device_node == "/dev/ttyUSB1"


def test_wait_for_waits_for_one_that_arrives_later(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="serial", vendor="0403", serial="OTHER")
    thread = plug_later(accmond, 0.3, kind="serial", vendor="0403", serial="WANTED", nodes=["/dev/ttyUSB9"])
    started = time.monotonic()
    try:
        found = accmon.Client().wait_for(kind="serial", vendor="403", serial="WANTED", timeout=10)
    finally:
        thread.join()
    assert found.device_node == "/dev/ttyUSB9"
    assert 0.25 <= time.monotonic() - started < 5


def test_wait_for_times_out_with_wait_timeout(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="serial", vendor="0403", serial="OTHER")
    thread = plug_later(accmond, 0.1, kind="usb", vendor="0403", serial="WANTED")  # not a serial port
    started = time.monotonic()
    with pytest.raises(accmon.WaitTimeout) as caught:
        accmon.Client().wait_for(kind="serial", serial="WANTED", timeout=0.5)
    thread.join()
    assert 0.5 <= time.monotonic() - started < 3
    assert isinstance(caught.value, TimeoutError) and caught.value.code == "timeout"
    assert str(caught.value) == "accmon: wait: no accessory matching kind=serial serial=WANTED connected within 0.5 s"
