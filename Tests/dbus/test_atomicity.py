"""Property: a peer that takes GetManagedObjects (or subscribes) while accessories come and go, then applies the
signals that arrive after the reply (or the Snapshot), ends up with the truth: no gap (a removal of what it does not
have), no duplicate (an addition of what it has), and at the end exactly what accmond lists for it."""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any, Callable, Dict, List, Set

from busrig import ACCESSORY_INTERFACE, GLibPeer, eventually

from accmon.simulator import SimulatedDaemon

VISIBLE_TO_NOBODY = ("1546",)  # the gps entry is the group's; the cable's is www-data's alone


def _object_manager_view(messages: List[Dict[str, Any]]) -> Set[str]:
    """The objects a peer holds: GetManagedObjects' reply, then each InterfacesAdded/Removed after it, checked."""
    view: Set[str] | None = None
    for message in messages:
        if message["type"] == "return" and message["signature"] == "(a{oa{sa{sv}}})":
            assert view is None, "two GetManagedObjects replies"
            view = set(message["body"][0])
        elif view is not None and message["type"] == "signal" and message["member"] == "InterfacesAdded":
            path = message["body"][0]
            assert path not in view, f"{path} added twice"
            assert ACCESSORY_INTERFACE in message["body"][1]
            view.add(path)
        elif view is not None and message["type"] == "signal" and message["member"] == "InterfacesRemoved":
            path = message["body"][0]
            assert path in view, f"{path} removed but never added"
            view.discard(path)
    assert view is not None, "no GetManagedObjects reply"
    return view


def _subscription_view(messages: List[Dict[str, Any]], path: str) -> Set[int]:
    """A subscriber's accessories: its Snapshot, then its Events in order, checked the same way, with sequences
    increasing."""
    view: Set[int] | None = None
    last = 0
    for message in messages:
        if message["type"] != "signal" or message["path"] != path:
            continue
        if message["member"] == "Snapshot":
            assert view is None, "two Snapshots"
            last = message["body"][0]
            view = {fields["ConnectionID"] for fields in message["body"][1]}
        elif message["member"] == "Events":
            assert view is not None, "Events before the Snapshot"
            for change, sequence, fields in message["body"][0]:
                assert sequence > last, f"sequence {sequence} after {last}"
                last = sequence
                connection = fields["ConnectionID"]
                if change == "connect":
                    assert connection not in view, f"connect of {connection} twice"
                    view.add(connection)
                else:
                    assert connection in view, f"disconnect of {connection}, never connected"
                    view.discard(connection)
    assert view is not None, "no Snapshot"
    return view


def test_snapshot_and_signals_are_the_truth_under_concurrent_plugs(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    seed = int(os.environ.get("ACCMON_TEST_SEED", random.randrange(1 << 32)))
    rng = random.Random(seed)
    replay = f"seed {seed} (replay with ACCMON_TEST_SEED={seed})"
    plugged: List[int] = []
    stop = threading.Event()
    steps = [0]

    def drive() -> None:
        # Plugs and unplugs without pause until told to stop: the peers below join while it runs.
        while not stop.is_set():
            if plugged and rng.random() < 0.45:
                daemon.unplug(plugged.pop(rng.randrange(len(plugged))))
            else:
                vendor = rng.choice(["1546", "0403"])
                step = steps[0]
                plugged.append(daemon.plug("usb", vendor=vendor, product=f"{step % 65536:04x}", serial=f"S{step}"))
            steps[0] += 1

    driver = threading.Thread(target=drive)
    driver.start()
    joined: List[tuple[GLibPeer, str, str]] = []
    pauses = random.Random(rng.random())
    for index in range(6):
        time.sleep(pauses.uniform(0, 0.15))
        user = "nobody" if index % 2 == 0 else "www-data"
        peer = peers(user=user, manager=True)
        subscription = peer.subscribe()
        # Acknowledged as they come: a subscriber that does not is suspended once its unacknowledged events pass the
        # buffer's bound (test_subscriptions.py).
        peer.auto_ack(subscription)
        joined.append((peer, subscription, user))
    at_last_join = steps[0]
    eventually(lambda: steps[0] >= at_last_join + 50, 30, "50 more plugs after the last peer joined")
    stop.set()
    driver.join(30)
    assert not driver.is_alive()
    assert steps[0] > 100, f"only {steps[0]} plugs: the peers did not join during a storm"
    truth = {accessory.connection_id: accessory.vendor_id for accessory in daemon.list()}
    for peer, subscription, user in joined:
        visible = {c for c, vendor in truth.items() if user == "www-data" or vendor in VISIBLE_TO_NOBODY}
        expected = {f"/org/accmon/Accmon1/accessories/{c}" for c in visible}
        eventually(lambda: set(peer.objects()) == expected, 15, f"{user}'s objects to be the truth, {replay}")
        assert _object_manager_view(peer.messages()) == expected, replay
        eventually(lambda: _subscription_view(peer.messages(), subscription) == visible, 15,
                   f"{user}'s subscription to be the truth, {replay}")  # fmt: skip
