"""Check-out through the asyncio client, against a real accmond: claim and release, contention told to the holder
with the name of who asked (a real other user), the line served in order, conflicts naming the holders, all or
nothing for two clients that want two accessories in opposite orders, and the notices of a claim's life."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from typing import Any, Coroutine, List, TypeVar

import pytest

import accmon
from accmon.simulator import SimulatedDaemon
from conftest import require_root

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def plug_adapter(daemon: SimulatedDaemon, serial: str = "A50285BI", port: str = "1-1.2") -> int:
    return daemon.plug(kind="serial", vendor="0403", product="6001", serial=serial, port=port,
                       nodes=[f"/dev/ttyUSB-{serial}", f"/dev/serial/by-id/usb-FTDI-{serial}"])  # fmt: skip


def test_a_claim_holds_until_released_then_another_gets_it(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect(client_name="flasher") as conn, accmon.connect(client_name="other") as other:
            async with conn.claim(adapter, reason="flashing") as claim:
                assert (claim.claim_id, claim.state, claim.active) == ("c-1", "held", True)
                assert claim.device_node == "/dev/ttyUSB-A50285BI"
                assert claim.device_nodes == ("/dev/ttyUSB-A50285BI", "/dev/serial/by-id/usb-FTDI-A50285BI")
                assert [accessory.connection_id for accessory in claim.accessories] == [adapter]
                assert len(claim.token) == 32 and claim.info.reason == "flashing"
                assert (claim.holder.uid, claim.holder.pid, claim.holder.client) == (os.getuid(), os.getpid(), "flasher")
                assert [node.path for node in claim.nodes] == list(claim.device_nodes)
                listed = await other.claims()
                assert [(c.claim_id, c.connections, c.reason) for c in listed.claims] == [("c-1", (adapter,), "flashing")]
                with pytest.raises(accmon.ClaimConflict):
                    await other.claim(adapter)
            assert claim.state == "released" and not claim.active
            assert (await other.claims()) == accmon.ClaimList()
            async with other.claim(kind="serial", serial="A50285BI") as second:
                assert second.accessories[0].connection_id == adapter and second.claim_id == "c-2"  # (a refused claim has no id)

    run(scenario())


def test_contention_is_told_to_the_holder_with_who_asked_and_why(accmond: SimulatedDaemon) -> None:
    require_root("another user asks for the accessory")
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect() as conn, conn.claim(adapter) as claim:
            started = time.time()
            with pytest.raises(accmon.ClaimConflict):
                await asyncio.get_running_loop().run_in_executor(
                    None, lambda: accmond.take(adapter, as_user="nobody", reason="my turn?"))
            notice = await claim.next_notice(10)
            assert notice is not None and notice.kind == "contention" and notice.claim_id == claim.claim_id
            assert notice.by is not None and (notice.by.name, notice.by.uid) == ("nobody", 65534)
            assert notice.by.client == "accmon.testing" and notice.reason == "my turn?"
            assert started - 1 <= notice.time <= time.time() + 1
            assert claim.state == "held"  # contention takes nothing

    run(scenario())


def test_waiters_are_served_first_come_first_served(accmond: SimulatedDaemon) -> None:
    require_root("waiters of three users")
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        async with accmon.connect() as conn:
            holder = await conn.claim(adapter)
            waiters = []
            for user in ("nobody", "daemon", "bin"):
                waiters.append(await loop.run_in_executor(None, functools.partial(accmond.take, adapter, as_user=user,
                                                                                  wait=True)))  # fmt: skip
            assert [(w.state, w.info.position, w.holder.uid) for w in waiters] == [
                ("waiting", 1, 65534), ("waiting", 2, 1), ("waiting", 3, 2)]  # fmt: skip
            assert [w.info.blockers[0].claim_id for w in waiters] == [holder.claim_id] * 3
            line = await conn.claims()
            assert [(w.claim_id, w.position, w.party.name) for w in line.waiters] == [
                (waiters[0].claim_id, 1, "nobody"), (waiters[1].claim_id, 2, "daemon"), (waiters[2].claim_id, 3, "bin")]  # fmt: skip
            assert line.claims[0].waiting == 3
            await holder.release()
            for index, waiter in enumerate(waiters):
                await loop.run_in_executor(None, waiter.wait_granted, 10)
                assert waiter.state == "held" and accmond.claim_on(adapter) == (await conn.claims()).claims[0]
                assert [w.state for w in waiters[index + 1:]] == ["waiting"] * (2 - index)  # the others still wait
                await loop.run_in_executor(None, waiter.release)

    run(scenario())


def test_a_conflict_names_every_holder_by_user_name(accmond: SimulatedDaemon) -> None:
    require_root("holders of two other users")
    first, second = plug_adapter(accmond, "A1", "1-1"), plug_adapter(accmond, "A2", "1-2")
    taken = [accmond.take(first, as_user="nobody", reason="night build"), accmond.take(second, as_user="daemon")]

    async def scenario() -> None:
        async with accmon.connect() as conn:
            with pytest.raises(accmon.ClaimConflict) as caught:
                await conn.claim(kind="serial", vendor="0403", count=2, reason="both please")
            error = caught.value
            assert error.code == "claim-conflict" and isinstance(error, accmon.ProtocolError)
            holders = sorted(error.holders, key=lambda summary: summary.connections)
            assert [(h.holder.name, h.holder.uid, h.connections, h.reason) for h in holders] == [
                ("nobody", 65534, (first,), "night build"), ("daemon", 1, (second,), "")]  # fmt: skip
            assert [h.holder.pid for h in holders] == [taken[0].process.pid, taken[1].process.pid]
            assert "held: " in error.message and "(ask with wait to wait in line)" in error.message
            with pytest.raises(accmon.ClaimConflict) as caught:
                await conn.claim(first)  # by connection: one holder
            assert [h.claim_id for h in caught.value.holders] == [taken[0].claim_id]

    run(scenario())
    for claim in taken:
        assert claim.next_notice(10) is not None  # each was told of the contention
        claim.release()


def test_two_clients_claiming_two_accessories_in_opposite_orders_never_deadlock(accmond: SimulatedDaemon) -> None:
    """All or nothing: 100 rounds of two clients that each want A and B, asked in opposite orders and waiting; each
    round both get both, one after the other, and neither ever holds one alone."""
    a, b = plug_adapter(accmond, "A", "1-1"), plug_adapter(accmond, "B", "1-2")

    async def scenario() -> None:
        inside: List[str] = []

        async def use(conn: accmon.Connection, name: str, order: List[int]) -> None:
            async with conn.claim(order, wait=True, timeout=10) as claim:
                assert sorted(accessory.connection_id for accessory in claim.accessories) == [a, b]
                assert not inside, f"{name} holds A and B while {inside} does"
                inside.append(name)
                await asyncio.sleep(0)
                inside.remove(name)

        async with accmon.connect(client_name="one") as one, accmon.connect(client_name="two") as two:
            for _ in range(100):
                await asyncio.wait_for(asyncio.gather(use(one, "one", [a, b]), use(two, "two", [b, a])), 10)
            assert await one.claims() == accmon.ClaimList()

    run(scenario())


def test_waiting_with_a_timeout_gives_the_place_up(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect() as conn, accmon.connect() as other, conn.claim(adapter, reason="mine") as held:
            waiting: List[accmon.ClaimInfo] = []
            started = time.monotonic()
            with pytest.raises(accmon.ClaimTimeout) as caught:
                await other.claim(adapter, timeout=0.3, on_waiting=waiting.append)
            assert 0.3 <= time.monotonic() - started < 5
            assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, accmon.ClaimConflict)
            assert caught.value.code == "timeout" and [h.claim_id for h in caught.value.holders] == [held.claim_id]
            assert [(info.state, info.position) for info in waiting] == [("waiting", 1)]
            assert (await conn.claims()).waiters == ()
            task = asyncio.ensure_future(other.claim(adapter, wait=True))
            while not (await conn.claims()).waiters:
                await asyncio.sleep(0.01)
            task.cancel()  # cancelling the task gives the place up too
            with pytest.raises(asyncio.CancelledError):
                await task
            while (await conn.claims()).waiters:
                await asyncio.sleep(0.01)

    run(scenario())


def test_a_broken_claim_is_told_by_whom_and_why_and_ends(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect() as conn, conn.claim(adapter) as claim:
            accmond.break_claim(adapter, reason="the bench is needed")
            notices = [notice async for notice in claim]  # ends after the notice that ends the claim
            assert [(n.kind, n.reason) for n in notices] == [("broken", "the bench is needed")]
            assert notices[0].by is not None and notices[0].by.client == "accmon.testing"
            assert claim.ended == notices[0] and claim.state == "ended" and not claim.active
            assert await claim.wait_ended(1) == notices[0]
            assert accmond.claim_on(adapter) is None

    run(scenario())


def test_a_claim_follows_its_accessory_through_a_reset_and_ends_when_it_does_not_come_back() -> None:
    with SimulatedDaemon(return_seconds=0.5) as daemon:
        adapter = plug_adapter(daemon)

        async def scenario() -> None:
            async with accmon.connect(daemon.socket) as conn, conn.claim(adapter) as claim:
                again = daemon.reenumerate(adapter)
                returning, returned = await claim.next_notice(10), await claim.next_notice(10)
                assert returning is not None and returning.kind == "returning"
                assert returning.accessory is not None and returning.accessory.connection_id == adapter
                assert returned is not None and returned.kind == "returned" and returned.claim is not None
                assert [accessory.connection_id for accessory in claim.accessories] == [again] and again != adapter
                assert claim.state == "held" and claim.device_node == "/dev/ttyUSB-A50285BI"
                daemon.unplug(again)
                started = time.monotonic()
                lost = await claim.wait_ended(10)
                assert lost is not None and lost.kind == "lost" and 0.4 <= time.monotonic() - started < 5
                assert [n.kind for n in [await claim.next_notice(1), await claim.next_notice(1)] if n] == [
                    "returning", "lost"]  # fmt: skip

        run(scenario())


def test_a_claim_ends_at_its_maximum_duration(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect() as conn:
            claim = await conn.claim(adapter, max_seconds=0.3)
            assert claim.info.expires_at is not None and claim.info.expires_at - claim.info.since == pytest.approx(0.3, abs=0.05)
            ended = await claim.wait_ended(10)
            assert ended is not None and (ended.kind, ended.reason) == ("expired", "maximum duration reached")
            await claim.release()  # ended already: nothing to do, no error

    run(scenario())


def test_a_waiting_claim_that_can_never_be_served_is_cancelled() -> None:
    with SimulatedDaemon(return_seconds=0.2) as daemon:
        adapter = plug_adapter(daemon)

        async def scenario() -> None:
            async with accmon.connect(daemon.socket) as conn, accmon.connect(daemon.socket) as other:
                await conn.claim(adapter)
                waiting = asyncio.ensure_future(other.claim(adapter, wait=True))
                while not (await conn.claims()).waiters:
                    await asyncio.sleep(0.01)
                daemon.unplug(adapter)  # and it never comes back
                with pytest.raises(accmon.ClaimCancelled) as caught:
                    await waiting
                assert caught.value.code == "claim-cancelled" and "did not come back" in caught.value.reason

        run(scenario())


def test_subscribers_with_claims_see_who_holds_what(accmond: SimulatedDaemon) -> None:
    adapter, mouse = plug_adapter(accmond), accmond.plug(kind="usb", vendor="046d", product="c52b")

    async def scenario() -> None:
        async with accmon.connect() as watcher, accmon.connect(client_name="holder") as conn:
            plain = await watcher.list()
            async with conn.claim(adapter, reason="busy"):
                # accmond resolves the holder's user name off its loop, then tells subscribers again: wait for it.
                while not (await watcher.claims()).claims[0].holder.user:
                    await asyncio.sleep(0.01)
                listed = await watcher.list(claims=True)
                assert list(listed.claims) == [adapter] and listed.claims[adapter].holder.client == "holder"
                assert plain.claims == {} and [a.extra for a in listed] == [{}, {}]
                sub = await watcher.subscribe(claims=True)
                assert sub.claims == listed.claims
            changes = sub.changes()
            released = await asyncio.wait_for(changes.__anext__(), 10)
            assert isinstance(released, accmon.ClaimUpdate) and (released.connection_id, released.claim) == (adapter, None)
            assert sub.claims == {}
            async with conn.claim(mouse, reason="clicking"):
                update = await asyncio.wait_for(changes.__anext__(), 10)
                assert isinstance(update, accmon.ClaimUpdate) and update.claim is not None
                assert (update.connection_id, update.claim.reason, update.accessory_id) == (mouse, "clicking", "usb:046d:c52b")
                assert sub.claims == {mouse: update.claim}
                accmond.unplug(adapter)
                event = await asyncio.wait_for(sub.__anext__(), 10)  # plain iteration: events only
                assert (event.change, event.accessory.connection_id) == ("disconnect", adapter)
            status = await watcher.status()
            assert (status.claims, status.claim_waiters) == (0, 0)

    run(scenario())


def test_a_plain_subscription_gets_no_claim_message(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        async with accmon.connect() as watcher, accmon.connect() as conn:
            sub = await watcher.subscribe()
            async with conn.claim(adapter):
                pass
            accmond.unplug(adapter)
            changes = sub.changes()
            event = await asyncio.wait_for(changes.__anext__(), 10)
            assert isinstance(event, accmon.AccessoryEvent) and event.change == "disconnect"

    run(scenario())
