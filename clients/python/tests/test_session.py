"""Session against a real accmond: first start and restore, acknowledgement on consumption, reconnection after the
daemon restarts, forgetting, and the filter of a first start."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, List, TypeVar

import pytest

import accmon
import accmon.link
from accmon.simulator import SimulatedDaemon, permissive_manifest

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


async def next_event(events: Any, timeout: float = 10) -> accmon.AccessoryEvent:
    event: accmon.AccessoryEvent = await asyncio.wait_for(events.__anext__(), timeout)
    return event


def names(accessories: List[accmon.Accessory]) -> List[str]:
    return [accessory.name for accessory in accessories]


def test_an_event_is_acknowledged_when_the_next_is_asked_for(accmond: SimulatedDaemon) -> None:
    present = accmond.plug(kind="usb", vendor="1209", name="Present")

    async def first_run() -> None:
        async with accmon.Session("app", client_name="app", socket=accmond.socket) as session:
            assert (session.restored, names(session.accessories)) == (False, ["Present"])
            events = session.events()
            accmond.plug(kind="usb", vendor="1209", name="One")
            accmond.plug(kind="usb", vendor="1209", name="Two")
            assert (await next_event(events)).accessory.name == "One"
            assert (await next_event(events)).accessory.name == "Two"  # asking for it acknowledged One
            # Two was handed but not consumed (the app did not ask for the next one): not acknowledged.

    run(first_run())
    accmond.unplug(present)

    async def second_run() -> None:
        async with accmon.Session("app", client_name="app", socket=accmond.socket) as session:
            assert session.restored
            assert names(session.accessories) == ["Present", "One"]  # as of the last acknowledgement
            events = session.events()
            replayed = [await next_event(events), await next_event(events)]
            assert [(e.change, e.accessory.name) for e in replayed] == [("connect", "Two"), ("disconnect", "Present")]
            assert names(session.current) == ["One", "Two"]

    run(second_run())


def test_the_filter_of_the_first_start_is_kept(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.Session("serial-only", socket=accmond.socket, kind="serial"):
            pass
        accmond.plug(kind="usb", vendor="1209", name="Stick")
        accmond.plug(kind="serial", vendor="0403", name="Adapter")
        async with accmon.Session("serial-only", socket=accmond.socket) as session:
            assert session.restored and session.accessories == []
            event = await next_event(session.events())
            assert (event.change, event.accessory.name) == ("connect", "Adapter")

    run(scenario())


def test_the_session_reconnects_after_the_daemon_restarts_and_reconciles(accmond: SimulatedDaemon) -> None:
    """Simulated accessories stay plugged in across the restart, as hardware does: the app's view keeps them, with no
    event, and what changed while accmond was away comes as events."""
    states: List[accmon.ConnectionState] = []
    kept = accmond.plug(kind="usb", vendor="1209", name="Plugged in across the restart")
    gone = accmond.plug(kind="usb", vendor="1209", name="Unplugged during the restart")

    async def scenario() -> None:
        async with accmon.Session("survivor", socket=accmond.socket, on_state=states.append) as session:
            events = session.events()
            accmond.stop()
            accmond.start()
            accmond.unplug(gone)  # (the session may be back already, or learn it by reconciliation)
            event = await next_event(events)
            assert (event.change, event.accessory.connection_id) == ("disconnect", gone)
            assert event.seq > 100000  # numbering continues after the reserved block
            assert session.connected
            assert [accessory.connection_id for accessory in session.current] == [kept]
            after = accmond.plug(kind="serial", vendor="0403", name="After")
            event = await next_event(events)
            assert (event.change, event.accessory.connection_id) == ("connect", after)
            assert [accessory.connection_id for accessory in session.current] == [kept, after]

    run(scenario())
    labels = [state.state for state in states]
    assert labels[:2] == ["connected", "reconnecting"] and labels[-2:] == ["connected", "closed"]
    reconnecting = [state for state in states if state.state == "reconnecting"]
    assert reconnecting[0].attempt == 1 and reconnecting[0].delay == pytest.approx(0.1)
    assert "accmond stopped: the daemon is shutting down" in reconnecting[0].reason
    assert states[-1].state == "closed"


def test_an_app_that_lags_holds_a_bounded_queue_and_gets_every_event(accmond: SimulatedDaemon) -> None:
    """Past 4096 unconsumed events the session takes no more from its connection (which in turn stops reading
    past 4096)."""

    async def scenario() -> None:
        async with accmon.Session("slow", socket=accmond.socket) as session:

            def plug_all() -> None:
                with accmon.Client(accmond.socket) as driver:
                    for index in range(6000):
                        driver.simulate_connect("usb", vendor="1209", serial=f"S{index}")

            await asyncio.get_running_loop().run_in_executor(None, plug_all)  # the loop reads meanwhile
            await asyncio.sleep(0.2)
            assert session._output is not None and len(session._output._items) == accmon.link.PAUSE_AT
            # The rest waits in the connection's queue (which stops reading at PAUSE_AT: test_connection.py).
            assert session._connection is not None and session._connection._link.pushes is not None
            assert len(session._connection._link.pushes) == 6000 - accmon.link.PAUSE_AT
            events = session.events()
            seqs = [(await next_event(events)).seq for _ in range(6000)]
            assert seqs == list(range(1, 6001))

    run(scenario())


def test_forget_makes_the_daemon_drop_the_session(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.Session("forgotten", socket=accmond.socket) as session:
            await session.forget()
            assert [event async for event in session.events()] == []
        async with accmon.Session("forgotten", socket=accmond.socket) as session:
            assert not session.restored  # a new session; leaving the block keeps it
        async with accmon.Session("forgotten", socket=accmond.socket) as session:
            assert session.restored
            await session.forget()

    run(scenario())
    assert not [c for c in accmond.client().status().clients if c["sessionID"] == "restore:forgotten"]


def test_a_session_cannot_start_without_a_daemon(accmond: SimulatedDaemon) -> None:
    accmond.stop()
    with pytest.raises(accmon.DaemonUnreachable):
        run(accmon.Session("nobody-home", socket=accmond.socket).start())
    with pytest.raises(ValueError, match="restore_id: expected a non-empty string"):
        accmon.Session("")


def test_a_session_registers_a_unit_for_relaunch_when_the_manifest_allows_it() -> None:
    manifest = permissive_manifest()
    manifest["relaunch"] = [{"unit": "accmon-viewer@.service", "access": {"users": [os.getuid()]}}]
    with SimulatedDaemon(manifest=manifest) as daemon:

        async def scenario() -> None:
            async with accmon.Session(
                "viewer", socket=daemon.socket, relaunch="accmon-viewer@.service"
            ) as session:
                assert not session.restored
            with pytest.raises(accmon.PermissionDenied, match="may not register 'accmon-other@.service'"):
                async with accmon.Session("other", socket=daemon.socket, relaunch="accmon-other@.service"):
                    pass
            with pytest.raises(accmon.ProtocolError, match="relaunch: 'rescue.target' is refused"):
                async with accmon.Session("rescue", socket=daemon.socket, relaunch="rescue.target"):
                    pass

        run(scenario())
        with open(daemon.log_path) as log:
            assert f"relaunch registered: accmon-viewer@{os.getuid()}.service" in log.read()
