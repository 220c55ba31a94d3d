"""The asyncio client against a real accmond: snapshot then events with filters, requests beside a subscription,
suspension, long lines, a consumer that lags, and how a subscription ends."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, List, Set, TypeVar

import pytest

import accmon
import accmon.link
from accmon.simulator import SimulatedDaemon

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


async def take(subscription: accmon.Subscription, count: int) -> List[accmon.AccessoryEvent]:
    return [await asyncio.wait_for(subscription.__anext__(), 10) for _ in range(count)]


def test_snapshot_then_events_with_each_filter_part(accmond: SimulatedDaemon) -> None:
    adapter = accmond.plug(kind="serial", vendor="0403", product="6001", name="Adapter", nodes=["/dev/ttyUSB0"])
    accmond.plug(kind="usb", vendor="046d", product="c52b", name="Mouse")

    async def scenario() -> None:
        async with accmon.connect(client_name="test") as conn:
            assert conn.protocol_version == 1 and conn.daemon_version and conn.session_id.startswith("s-")
            serial = await conn.subscribe(kind="serial")
        async with accmon.connect() as by_vendor, accmon.connect() as by_product, accmon.connect() as by_protocol:
            vendor_sub = await by_vendor.subscribe(vendor=0x403)
            product_sub = await by_product.subscribe(vendor="46D", product="c52b")
            protocol_sub = await by_protocol.subscribe(protocol="com.example.keys")
            assert [a.connection_id for a in serial.snapshot] == [adapter]
            assert serial.snapshot[0].device_node == "/dev/ttyUSB0"
            assert [a.name for a in vendor_sub.snapshot] == ["Adapter"]
            assert [a.name for a in product_sub.snapshot] == ["Mouse"]
            assert list(protocol_sub.snapshot) == []
            assert vendor_sub.snapshot.seq == 2
            keys = accmond.plug(kind="bluetooth-hid", name="Keys", protocols=["com.example.keys"])
            second = accmond.plug(kind="serial", vendor="0403", product="6015", name="Second")
            accmond.unplug(adapter)
            assert [(e.change, e.accessory.name, e.seq) for e in await take(vendor_sub, 2)] == [
                ("connect", "Second", 4),
                ("disconnect", "Adapter", 5),
            ]
            assert [(e.change, e.accessory.connection_id) for e in await take(protocol_sub, 1)] == [("connect", keys)]
            assert await product_sub.next_event(timeout=0.2) is None  # nothing of 046d:c52b happened
            assert second > keys

    run(scenario())


def test_no_accessory_is_missing_or_repeated_between_snapshot_and_events(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.connect() as conn:
            plugged: List[int] = [accmond.plug(kind="usb", vendor="1209", serial=f"S{i}") for i in range(5)]
            subscription = await conn.subscribe()
            plugged += [accmond.plug(kind="usb", vendor="1209", serial=f"T{i}") for i in range(5)]
            seen: Set[int] = {accessory.connection_id for accessory in subscription.snapshot}
            for event in await take(subscription, 5):
                assert event.seq > subscription.snapshot.seq and event.accessory.connection_id not in seen
                seen.add(event.accessory.connection_id)
            assert seen == set(plugged)

    run(scenario())


def test_requests_beside_a_subscription_and_unsubscribe_ends_the_iteration(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.connect() as conn:
            subscription = await conn.subscribe(kind="usb")
            accmond.plug(kind="usb", vendor="1209", name="Stick")
            accmond.plug(kind="serial", vendor="0403", name="Adapter")
            assert [a.name for a in await conn.list()] == ["Stick", "Adapter"]
            assert [a.name for a in await conn.list(kind="serial")] == ["Adapter"]
            status = await conn.status()
            assert (status.connected_accessories, status.simulate, status.sequence) == (2, True, 2)
            assert any(client["subscribed"] for client in status.clients)
            await conn.unsubscribe()
            names = [event.accessory.name async for event in subscription]
            assert names == ["Stick"]  # what arrived before the unsubscribe, then the end
            subscription = await conn.subscribe(kind="serial")  # a connection may subscribe again
            assert [a.name for a in subscription.snapshot] == ["Adapter"]

    run(scenario())


def test_suspend_holds_and_coalesces_events_until_resume(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.connect() as conn:
            subscription = await conn.subscribe()
            await conn.suspend()
            brief = accmond.plug(kind="usb", vendor="1209", name="Brief")
            stays = accmond.plug(kind="usb", vendor="1209", name="Stays")
            accmond.unplug(brief)
            assert await subscription.next_event(timeout=0.2) is None
            await conn.resume()
            event = await subscription.next_event(timeout=5)
            assert event is not None and (event.change, event.accessory.connection_id, event.seq) == ("connect", stays, 2)
            assert await subscription.next_event(timeout=0.2) is None  # Brief came and went: coalesced away

    run(scenario())


def test_a_snapshot_longer_than_64_kib_is_one_line(accmond: SimulatedDaemon) -> None:
    for index in range(200):
        accmond.plug(kind="serial", vendor="0403", product="6001", name="Adapter " * 10, serial=f"S{index:04d}")

    async def scenario() -> None:
        async with accmon.connect() as conn:
            subscription = await conn.subscribe()
            assert len(subscription.snapshot) == 200
            assert len(await conn.list(vendor="0403")) == 200

    run(scenario())


def test_a_consumer_that_lags_gets_every_event_in_order(accmond: SimulatedDaemon) -> None:
    """The link stops reading past 4096 queued events; the daemon then queues them, and nothing is lost."""

    async def scenario() -> None:
        async with accmon.connect() as conn:
            subscription = await conn.subscribe()

            def plug_all() -> None:
                with accmon.Client(accmond.socket) as driver:
                    for index in range(6000):
                        driver.simulate_connect("usb", vendor="1209", serial=f"L{index}")

            await asyncio.get_running_loop().run_in_executor(None, plug_all)  # the loop reads meanwhile
            # It stops after the read that reached the mark: the rest of that read (at most 64 KiB) is queued too.
            assert conn._link._paused and accmon.link.PAUSE_AT <= len(subscription._pushes) < accmon.link.PAUSE_AT + 150
            seqs = [event.seq for event in await take(subscription, 6000)]
            assert seqs == list(range(1, 6001))
            assert not conn._link._paused

    run(scenario())


def test_the_daemon_stopping_ends_the_subscription_with_daemon_stopped(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        conn = await accmon.connect()
        subscription = await conn.subscribe()
        accmond.plug(kind="usb")
        assert accmond.stop() == 0
        assert (await subscription.__anext__()).change == "connect"  # queued events come first
        with pytest.raises(accmon.DaemonStopped, match="accmon: accmond stopped: the daemon is shutting down"):
            await subscription.__anext__()
        assert conn.closed
        with pytest.raises(accmon.DaemonStopped):
            await conn.status()

    run(scenario())


def test_closing_the_connection_ends_the_iteration_and_fails_requests(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        conn = await accmon.connect()
        subscription = await conn.subscribe()
        waiter = asyncio.ensure_future(subscription.__anext__())
        await asyncio.sleep(0.05)
        await conn.aclose()
        with pytest.raises(StopAsyncIteration):
            await waiter
        with pytest.raises(accmon.ConnectionClosed, match="the connection is closed"):
            await conn.list()

    run(scenario())
