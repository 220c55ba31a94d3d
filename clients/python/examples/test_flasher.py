# test_flasher.py: an app's own tests, with simulated accessories. Run: pytest -p accmon.testing test_flasher.py
import asyncio
from typing import List

import pytest

import accmon
from accmon.simulator import SimulatedDaemon


def find_flasher_port(timeout: float) -> str:
    """The code under test: waits for the FTDI flashing adapter and returns its serial port."""
    with accmon.Client() as client:  # finds the test's accmond through $ACCMON_SOCKET
        adapter = client.wait_for(kind="serial", vendor="0403", product="6001", timeout=timeout)
    assert adapter.device_node is not None
    return adapter.device_node


def test_finds_the_adapter_plugged_in(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="usb", vendor="046d", product="c52b", name="Mouse")
    accmond.plug(kind="serial", vendor="0403", product="6001", serial="A50285BI", nodes=["/dev/ttyUSB3"])
    assert find_flasher_port(timeout=5) == "/dev/ttyUSB3"


def test_gives_up_without_the_adapter(accmond: SimulatedDaemon) -> None:
    with pytest.raises(accmon.WaitTimeout):
        find_flasher_port(timeout=0.2)


def test_sees_the_adapter_come_and_go(accmond: SimulatedDaemon) -> None:
    async def watch() -> List[str]:
        changes = []
        async with accmon.connect() as conn:
            subscription = await conn.subscribe(kind="serial")
            adapter = accmond.plug(kind="serial", vendor="0403", product="6001")
            accmond.unplug(adapter)
            async for event in subscription:
                changes.append(f"{event.change} {event.accessory.connection_id}")
                if event.change == "disconnect":
                    break
        return changes

    assert asyncio.run(watch()) == ["connect 1", "disconnect 1"]
