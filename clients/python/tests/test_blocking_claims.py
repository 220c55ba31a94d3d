"""Check-out through the blocking client, and what both clients share: a claim kept across a restart of accmond and
taken up by its token, the errors of claim and release (a real other user where it matters), and the arguments
refused before anything is sent."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

import accmon
from accmon.simulator import SimulatedDaemon
from conftest import require_root


def plug_adapter(daemon: SimulatedDaemon, serial: str = "A50285BI", port: str = "1-1.2") -> int:
    return daemon.plug(kind="serial", vendor="0403", product="6001", serial=serial, port=port,
                       nodes=[f"/dev/ttyUSB-{serial}"])  # fmt: skip


def test_a_blocking_claim_with_its_notices_queued_and_called_back(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)
    called: List[accmon.ClaimNotice] = []
    with accmon.Client(client_name="script") as client:
        with client.claim(kind="serial", vendor=0x0403, reason="flashing", on_notice=called.append) as claim:
            assert (claim.claim_id, claim.state, claim.device_node) == ("c-1", "held", "/dev/ttyUSB-A50285BI")
            assert claim.holder.client == "script" and claim.active
            with pytest.raises(accmon.ClaimConflict) as caught:
                client.claim(adapter, reason="again")
            assert caught.value.holders[0].claim_id == "c-1"
            notice = claim.next_notice(10)
            assert notice is not None and (notice.kind, notice.reason) == ("contention", "again")
            assert called == [notice]  # the callback ran on the claim's thread as it arrived
            assert claim.next_notice(0.05) is None
        assert claim.state == "released" and client.claims() == accmon.ClaimList()
        assert list(claim) == []  # the notices ended with the release


def test_a_blocking_claim_waits_in_line_until_the_holder_releases(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)
    client = accmon.Client()
    holder = client.claim(adapter)
    started = time.monotonic()
    releaser = threading.Timer(0.3, holder.release)
    releaser.start()
    places: List[int] = []
    with client.claim(adapter, wait=True, on_waiting=lambda info: places.append(info.position or 0)) as claim:
        assert time.monotonic() - started >= 0.3 and claim.state == "held" and places == [1]
        assert client.claims().on(adapter) is not None
    releaser.join()
    with pytest.raises(accmon.ClaimTimeout):
        with client.claim(adapter), client.claim(adapter, timeout=0.2):
            pass
    assert client.claims() == accmon.ClaimList()
    client.close()


def test_a_broken_blocking_claim_ends_its_iteration(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)
    with accmon.Client() as client, client.claim(adapter) as claim:
        breaker = threading.Timer(0.2, accmond.break_claim, (adapter, "maintenance"))
        breaker.start()
        notices = list(claim)  # blocks until the claim ends
        breaker.join()
        assert [(n.kind, n.reason) for n in notices] == [("broken", "maintenance")]
        assert claim.wait_ended(1) == notices[0] and claim.state == "ended"


def stop_and_start(daemon: SimulatedDaemon, how: str) -> None:
    if how == "restart":
        daemon.restart()  # SIGTERM, as an upgrade does
    else:
        daemon.kill()  # at once: a claim is on disk before its holder hears of it
        daemon.start()


RESTARTS = ["restart", "kill -9"]


@pytest.mark.parametrize("how", RESTARTS)
def test_a_claim_kept_across_a_restart_is_taken_up_by_its_token(accmond: SimulatedDaemon, how: str) -> None:
    adapter = plug_adapter(accmond)
    time.sleep(0.3)  # a plug reaches the state file within 100 ms (a claim's grant before its reply)

    async def scenario() -> None:
        conn = await accmon.connect()
        claim = await conn.claim(adapter, reason="kept")
        await asyncio.get_running_loop().run_in_executor(None, stop_and_start, accmond, how)
        with pytest.raises(accmon.ConnectionClosed):
            await claim.wait_ended(10)
        with pytest.raises(accmon.ClaimConflict):  # accmond keeps it for its holder meanwhile
            accmond.take(adapter)
        async with accmon.connect() as again, again.claim(token=claim.token) as resumed:
            assert (resumed.claim_id, resumed.state, resumed.token) == (claim.claim_id, "held", claim.token)
            assert [a.connection_id for a in resumed.accessories] == [adapter] and resumed.info.reason == "kept"
            assert [c.claim_id for c in (await again.claims()).claims] == [claim.claim_id]
        await conn.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert accmond.claims() == accmon.ClaimList()
    with accmon.Client() as client:
        blocking = client.claim(adapter)
        stop_and_start(accmond, how)
        with pytest.raises(accmon.ConnectionClosed):
            blocking.wait_ended(10)
        with client.claim(token=blocking.token) as resumed:
            assert resumed.claim_id == blocking.claim_id and resumed.device_node == "/dev/ttyUSB-A50285BI"
        with pytest.raises(accmon.ProtocolError) as caught:
            client.claim(token=blocking.token)  # released: the token names nothing any more
        assert caught.value.code == "no-such-claim"


@pytest.mark.parametrize("how", RESTARTS)
def test_a_place_in_line_cut_by_a_restart_is_taken_up_by_its_token(accmond: SimulatedDaemon, how: str) -> None:
    adapter = plug_adapter(accmond)

    async def scenario() -> None:
        holder = await accmon.connect()
        held = await holder.claim(adapter, reason="first")
        waiter = await accmon.connect()
        waiting = asyncio.ensure_future(waiter.claim(adapter, wait=True))
        while not (await holder.claims()).waiters:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # the place reaches the state file within 100 ms
        await asyncio.get_running_loop().run_in_executor(None, stop_and_start, accmond, how)
        with pytest.raises(accmon.ConnectionClosed) as caught:
            await waiting
        token = caught.value.claim_token
        assert token is not None
        async with accmon.connect() as again, again.claim(token=held.token) as taken_up:
            async with accmon.connect() as returned:
                resumed = asyncio.ensure_future(returned.claim(token=token, wait=True))
                while [w.claim_id for w in (await again.claims()).waiters] != ["c-2"]:
                    await asyncio.sleep(0.01)
                await taken_up.release()
                granted = await asyncio.wait_for(resumed, 10)
                assert granted.claim_id == "c-2" and [a.connection_id for a in granted.accessories] == [adapter]
                await granted.release()
        await holder.aclose()
        await waiter.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert accmond.claims() == accmon.ClaimList()
    with accmon.Client() as client, client.claim(adapter):
        with accmon.Client() as other:
            results: List[Any] = []
            blocking = threading.Thread(target=lambda: results.append(catch(lambda: other.claim(adapter, wait=True))))
            blocking.start()
            while not client.claims().waiters:
                time.sleep(0.01)
            time.sleep(0.3)
            stop_and_start(accmond, how)
            blocking.join(20)
            assert len(results) == 1 and isinstance(results[0], accmon.ConnectionClosed), results
            assert results[0].claim_token is not None


def catch(call: Callable[[], Any]) -> Any:
    """What `call` returns, or the exception it raises."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - the test looks at it
        return error


def test_a_blocking_subscription_with_claims(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)
    with accmon.Client() as client, client.subscribe(claims=True) as sub:
        assert sub.claims == {} and client.list(claims=True).claims == {}
        with client.claim(adapter, reason="r"):
            change = sub.next_change(10)
            assert isinstance(change, accmon.ClaimUpdate) and change.claim is not None and change.claim.reason == "r"
            assert list(sub.claims) == [adapter] and list(client.list(claims=True).claims) == [adapter]
        accmond.unplug(adapter)
        event = sub.next_event(10)  # the release's update is taken on the way
        assert event is not None and event.change == "disconnect" and sub.claims == {}


def test_claim_and_release_errors(accmond: SimulatedDaemon) -> None:
    adapter = plug_adapter(accmond)
    client = accmon.Client()
    cases: List[Tuple[Dict[str, Any], str]] = [
        ({"connections": (99,)}, "no-such-connection"), ({"kind": "bluetooth-hid"}, "no-match"),
        ({"kind": "serial", "count": 2}, "no-match"), ({"token": "0" * 32}, "no-such-claim"),
    ]  # fmt: skip
    for arguments, code in cases:
        connections: Any = arguments.pop("connections", ())
        with pytest.raises(accmon.ProtocolError) as caught:
            client.claim(*connections, **arguments)
        assert caught.value.code == code and type(caught.value) is accmon.ProtocolError, arguments
        assert code in accmon.PROTOCOL_ERROR_CODES
    for target in ("c-99", adapter, "serial:nothing"):
        with pytest.raises(accmon.ProtocolError) as caught:
            client.release(target)
        assert caught.value.code == "no-such-claim"
        assert caught.value.message.startswith("release: ")
    client.close()


def test_only_the_holder_or_an_admin_ends_a_claim(accmond: SimulatedDaemon) -> None:
    require_root("a claim of another user")
    adapter = plug_adapter(accmond)
    taken = accmond.take(adapter, as_user="nobody")
    with accmon.Client() as client:
        # root is an admin, but without force it may not release another's claim
        with pytest.raises(accmon.PermissionDenied) as caught:
            client.release(adapter)
        assert "only its holder releases it" in str(caught.value) and caught.value.code == "permission-denied"
        client.release(adapter, force=True, reason="needed")
    ended = taken.wait_ended(10)
    assert ended is not None and ended.kind == "broken" and ended.by is not None and ended.by.name == "root"
    assert not taken.active
    taken.release()  # closes its connection: the claiming process ends
    assert taken.process.wait(10) == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (dict(connections=(1,), kind="serial"), "claim: name connections or a filter"),
        (dict(token="x", kind="usb"), "claim: token: a claim taken up by its token names nothing else"),
        (dict(connections=(1, 1)), "claim: connections: a connection is named twice"),
        (dict(connections=(-1,)), "claim: connections: expected connection ids or accessories, not -1"),
        (dict(connections=(True,)), "claim: connections: expected connection ids or accessories, not True"),
        (dict(count=0), "claim: count: expected 1 to 64"),
        (dict(count=65), "claim: count: expected 1 to 64"),
        (dict(timeout=-1), "claim: timeout: expected a number of seconds, 0 or more"),
        (dict(max_seconds=0), "claim: max_seconds: expected more than 0"),
        (dict(kind="hid"), "filter: kind: 'hid' is not a kind"),
        (dict(vendor="0x0403"), "filter: vendor: '0x0403' is not a hex id"),
    ],
)
def test_arguments_that_do_not_go_together_are_refused_before_anything_is_sent(
    arguments: Dict[str, Any], message: str
) -> None:
    connections = arguments.pop("connections", ())
    with pytest.raises(ValueError, match=message):
        accmon.Client("/nonexistent/accmon.sock").claim(*connections, **arguments)

    async def scenario() -> None:
        conn = accmon.Connection.__new__(accmon.Connection)  # never connected: nothing may be sent
        conn.claim(*connections, **arguments)

    with pytest.raises(ValueError, match=message):
        asyncio.run(scenario())
    with pytest.raises(ValueError, match="release: expected a connection id"):
        accmon.Client("/nonexistent/accmon.sock").release("")
