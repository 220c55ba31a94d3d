"""The claim values: every field accmond sends is known (none lands in ``extra``), a field of the wrong type is an
``invalid-response`` naming it, a later field is kept, and ``to_json`` gives back what accmond sent."""

from __future__ import annotations

import json
import socket
from typing import Any, Dict, List

import pytest

import accmon
from accmon.claim_model import ClaimInfo, ClaimSummary, ClaimWaiter, Party
from accmon.simulator import SimulatedDaemon


def raw_messages(daemon: SimulatedDaemon, requests: List[Dict[str, Any]], count: int) -> List[Dict[str, Any]]:
    """Sends `requests` on a raw connection and returns the first `count` lines after hello, decoded."""
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(daemon.socket)
    stream = connection.makefile("rwb")
    for request in [{"type": "hello", "versions": [1], "id": 0, "client": "raw"}, *requests]:
        stream.write(json.dumps(request).encode() + b"\n")
    stream.flush()
    lines = [json.loads(stream.readline()) for _ in range(count + 1)][1:]
    connection.close()
    return lines


def test_every_field_accmond_sends_is_known_and_written_back_as_sent(accmond: SimulatedDaemon) -> None:
    adapter = accmond.plug(kind="serial", vendor="0403", serial="A1", nodes=["/dev/ttyUSB0"], port="1-1")
    holder = accmond.take(adapter, reason="held", max_seconds=600)
    accmond.take(adapter, wait=True, reason="waits")
    waiting, claims, listed = raw_messages(accmond, [
        {"type": "claim", "id": 1, "connections": [adapter], "wait": True}, {"type": "claims", "id": 2},
        {"type": "list", "id": 3, "claims": True}], 3)  # fmt: skip
    info = ClaimInfo.from_json(waiting["claim"])
    assert info.state == "waiting" and info.position == 2 and info.extra == {}
    assert [blocker.claim_id for blocker in info.blockers] == [holder.claim_id]
    assert all(blocker.extra == {} and blocker.holder.extra == {} for blocker in info.blockers)
    held = accmon.ClaimList.from_message(claims)
    assert held.claims[0].expires_at is not None and [w.position for w in held.waiters] == [1, 2]
    assert [summary.to_json() for summary in held.claims] == claims["claims"]
    assert [waiter.to_json() for waiter in held.waiters] == claims["waiters"]
    assert all(item.extra == {} for item in held.claims) and all(item.extra == {} for item in held.waiters)
    snapshot = accmon.Snapshot.from_message(listed)
    assert snapshot.claims[adapter].to_json() == listed["accessories"][0]["claim"]
    assert snapshot[0].extra == {}


def test_a_field_of_the_wrong_type_is_an_invalid_response_naming_it() -> None:
    summary = {"claimID": "c-1", "holder": {"user": "alice", "uid": 1000}, "since": 1.5, "reason": "", "waiting": 0,
               "state": "held", "connections": [3], "accessoryIDs": ["a"]}  # fmt: skip
    assert ClaimSummary.from_json(summary).holder == Party("alice", 1000)
    for key, value, message in [("connections", ["3"], "claim.connections[0]: expected an integer"),
                                ("since", "now", "claim.since: expected a number"),
                                ("holder", [], "claim.holder: expected an object"),
                                ("waiting", 1.5, "claim.waiting: expected an integer")]:  # fmt: skip
        with pytest.raises(accmon.ProtocolError) as caught:
            ClaimSummary.from_json(dict(summary, **{key: value}))
        assert caught.value.code == "invalid-response" and caught.value.message == f"accmon: {message}"
    with pytest.raises(accmon.ProtocolError, match=r"claim-notice.by.remote: expected true or false"):
        accmon.ClaimNotice.from_message({"type": "claim-notice", "claimID": "c-1", "kind": "contention", "time": 1,
                                         "by": {"user": "x", "remote": "no"}})  # fmt: skip
    later = ClaimWaiter.from_json({"claimID": "c-2", "party": {"user": "bob", "shift": "night"}, "since": 2,
                                   "priority": 3})  # fmt: skip
    assert later.extra == {"priority": 3} and later.party.extra == {"shift": "night"}
    assert later.to_json()["priority"] == 3 and later.to_json()["party"]["shift"] == "night"


def test_a_party_is_named_as_the_swift_description() -> None:
    assert str(Party("alice", 1000, 4242, "accmon")) == "alice (uid 1000, pid 4242, accmon)"
    assert str(Party("ci", remote=True)) == "ci (remote)"
    assert str(Party("", 4_000_000_000)) == "uid 4000000000"  # no name here for that uid
    assert Party("", 0).name == "root"  # accmond had no name yet: this host's
    assert str(Party("", 0, 7)) == "root (uid 0, pid 7)"
    assert Party().name == "?"


def test_notice_kinds_and_which_end_a_claim() -> None:
    assert accmon.NOTICE_KINDS == ("granted", "contention", "broken", "returning", "returned", "lost", "expired",
                                   "cancelled")  # fmt: skip
    ending = {kind for kind in accmon.NOTICE_KINDS
              if accmon.ClaimNotice("c-1", kind, 0).ends_claim}  # fmt: skip
    assert ending == {"broken", "lost", "expired", "cancelled"}
