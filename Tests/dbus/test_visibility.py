"""Each user sees on the bus only what the manifest lets it see: not in GetManagedObjects, Introspect, Get or GetAll,
nor in any message it receives. Two members of the group; the cable's entry names only www-data."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List

from busrig import ACCESSORY_INTERFACE, MANAGER, SUBSCRIPTION_INTERFACE, GLibPeer, accessory_path, eventually
from conftest import MANIFEST

from accmon.simulator import SimulatedDaemon


def _mentions(messages: List[Dict[str, Any]], connection_id: int, words: List[str]) -> List[Dict[str, Any]]:
    """The messages that name the connection (in their path or their body) or carry any of `words`."""
    found = []
    for message in messages:
        text = json.dumps(message)
        if str(message.get("path", "")).endswith(f"/{connection_id}") or any(word in text for word in words):
            found.append(message)
            continue
        if f'"ConnectionID": {connection_id}' in text or f"/accessories/{connection_id}\"" in text:
            found.append(message)
    return found


def test_a_user_receives_nothing_of_an_accessory_the_manifest_hides_from_it(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    allowed = peers(user="www-data", manager=True)
    other = peers(user="nobody", manager=True)
    allowed_events = allowed.subscribe()
    other_events = other.subscribe()
    gps = daemon.plug("usb", vendor="1546", product="01a7", name="u-blox GPS", serial="G1")
    cable = daemon.plug("serial", vendor="0403", product="6001", name="Secret cable", serial="FTSECRET",
                        nodes=["/dev/ttyUSB7"])  # fmt: skip
    # Claimed and released by root: PropertiesChanged to those who see it.
    with daemon.client().claim(cable, reason="bench"):
        eventually(lambda: allowed.signals("PropertiesChanged", accessory_path(cable)), 10, "the claim's change")
    eventually(lambda: len(allowed.signals("PropertiesChanged", accessory_path(cable))) >= 2, 10, "the release")
    daemon.unplug(cable)
    cable_again = daemon.plug("serial", vendor="0403", product="6001", name="Secret cable", serial="FTSECRET")
    marker = daemon.plug("usb", vendor="1546", product="0002", name="marker")
    # Both have seen the marker: everything before it was sent to them.
    for peer, path in ((allowed, allowed_events), (other, other_events)):
        eventually(lambda: accessory_path(marker) in peer.objects(), 10, "the marker object")
        eventually(
            lambda: any(event[2]["ConnectionID"] == marker for signal in peer.signals("Events", path)
                        for event in signal["body"][0]), 10, "the marker event")  # fmt: skip

    # The allowed user saw the cable everywhere.
    assert accessory_path(cable_again) in allowed.objects()
    seen = _mentions(allowed.messages(), cable, ["FTSECRET", "Secret cable"])
    assert {m["member"] for m in seen} >= {"InterfacesAdded", "InterfacesRemoved", "PropertiesChanged", "Events"}

    # The other user: nothing, in any message, of either connection of the cable.
    secret_words = ["FTSECRET", "Secret cable", "com.acme.cable", "ttyUSB7", "0403"]
    for connection in (cable, cable_again):
        leaked = _mentions(other.messages(), connection, secret_words)
        assert leaked == [], leaked
    objects = other.objects()
    assert set(objects) == {accessory_path(gps), accessory_path(marker)}
    introspected = other.ok(f"{MANAGER}/accessories", "org.freedesktop.DBus.Introspectable", "Introspect")[0]
    assert f'name="{cable_again}"' not in introspected and f'name="{gps}"' in introspected
    for member, args in (("Get", f"('{ACCESSORY_INTERFACE}', 'Name')"), ("GetAll", f"('{ACCESSORY_INTERFACE}',)")):
        answer = other.call(accessory_path(cable_again), "org.freedesktop.DBus.Properties", member, args)
        assert answer.get("error") == "org.accmon.Accmon1.Error.UnknownObject", answer
    answer = other.call(accessory_path(cable_again), "org.freedesktop.DBus.Introspectable", "Introspect")
    assert answer.get("error") == "org.accmon.Accmon1.Error.UnknownObject", answer
    # Nor can it reach the allowed user's subscription object.
    answer = other.call(allowed_events, SUBSCRIPTION_INTERFACE, "Suspend")
    assert answer.get("error") == "org.accmon.Accmon1.Error.UnknownObject", answer


def test_a_reload_that_shows_or_hides_an_accessory_adds_or_removes_its_object(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    other = peers(user="nobody", manager=True)
    events = other.subscribe()
    cable = daemon.plug("serial", vendor="0403", product="6001", name="Secret cable")
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["accessories"][1]["access"]["users"].append("nobody")
    with open(daemon.manifest_path, "w") as out:
        json.dump(manifest, out)
    daemon.client().reload_manifest()
    eventually(lambda: accessory_path(cable) in other.objects(), 10, "the cable shown after the reload")
    eventually(
        lambda: [e[0] for s in other.signals("Events", events) for e in s["body"][0]] == ["connect"], 10,
        "a connect on the subscription",
    )  # fmt: skip
    with open(daemon.manifest_path, "w") as out:
        json.dump(MANIFEST, out)
    # The bus's own Reload, by root (an admin): answered once the manifest is in force.
    root = peers()
    root.ok(MANAGER, "org.accmon.Accmon1.Manager", "Reload")
    eventually(lambda: accessory_path(cable) not in other.objects(), 10, "the cable hidden again")
    with open(daemon.manifest_path, "w") as out:
        out.write("{ not json")
    refused = root.call(MANAGER, "org.accmon.Accmon1.Manager", "Reload")
    assert refused.get("error") == "org.accmon.Accmon1.Error.Failed" and "previous manifest stays" in refused["message"]
    eventually(
        lambda: [e[0] for s in other.signals("Events", events) for e in s["body"][0]] == ["connect", "disconnect"], 10,
        "a disconnect on the subscription",
    )  # fmt: skip
