"""Claims across the fleet through the MQTT broker the hosts' bridges use (docs/MQTT.md §12).

The optional part of this package: it needs an MQTT 5 client, Debian's ``python3-paho-mqtt`` (``apt install
python3-paho-mqtt``), imported only when a :class:`FleetClaimer` is made; the rest of ``accmon`` needs nothing beyond
the standard library. ::

    from accmon.fleet import FleetClaimer

    with FleetClaimer("broker.example.net", username="ci", password=secret) as fleet:
        with fleet.claim(serial="A50285BI", wait=True, timeout=600, reason="nightly") as claim:
            flash(claim.host, claim.device_node)

A claim is a request to the host the accessory is on; that host's bridge forwards it to accmond, which decides it in
one line with the host's local claimers. The claim is a lease: while it is held, a thread renews it every
``renewSeconds`` the host asked for; when the ``with`` block ends it is released. Who claims is the MQTT user the
broker authenticated, never a field of the request.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Any, Dict, List, NoReturn, Optional

from .claim_conflicts import ClaimConflict
from .errors import AccmonError, PermissionDenied

__all__ = ["FleetClaim", "FleetClaimer"]

#: Notices after which a claim has ended.
ENDING_KINDS = frozenset({"broken", "lost", "expired", "cancelled", "lease-expired"})


def _level(text: str) -> str:
    """`text` as one topic level, percent-encoded as docs/MQTT.md §3 says (the characters MQTT gives a meaning)."""
    out: List[str] = []
    for char in text:
        code = ord(char)
        if char in "/+#%$" or code < 0x20 or 0x7F <= code <= 0x9F:
            out.extend(f"%{byte:02X}" for byte in char.encode())
        else:
            out.append(char)
    return "".join(out)


class FleetClaim:
    """A claim held on one host: its accessories there, the notices about it, and its end."""

    def __init__(self, claimer: "FleetClaimer", reply: Dict[str, Any]) -> None:
        self._claimer = claimer
        self.host: str = reply["host"]
        self.claim_id: str = reply["claimID"]
        self.accessories: List[Dict[str, Any]] = list(reply.get("accessories") or [])
        self.renew_seconds: float = float(reply.get("renewSeconds") or 10)
        #: The notices about the claim, oldest first (``contention``, ``broken``, ``lease-expired``...).
        self.notices: List[Dict[str, Any]] = []
        #: The kind of the notice that ended it, or ``None`` while it holds.
        self.ended: Optional[str] = None
        self._renewed = 0.0

    @property
    def device_node(self) -> Optional[str]:
        """The first device node of the first accessory: its path on :attr:`host`."""
        for accessory in self.accessories:
            for node in accessory.get("deviceNodes") or []:
                return str(node)
        return None

    def release(self) -> None:
        """Ends the claim (once; what the host does not answer ends with its lease)."""
        if self.ended is None:
            self.ended = "released"
            self._claimer._release(self)

    def __enter__(self) -> "FleetClaim":
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


class FleetClaimer:
    """An MQTT user claiming accessories of the fleet. Use as a context manager, or :meth:`close` it."""

    def __init__(self, broker: str, port: int = 1883, *, username: str, password: str, prefix: str = "accmon",
                 ca: Optional[str] = None, keepalive: int = 30) -> None:  # fmt: skip
        try:
            import paho.mqtt.client as mqtt  # type: ignore[import-not-found, import-untyped, unused-ignore]
            from paho.mqtt.packettypes import PacketTypes  # type: ignore[import-not-found, import-untyped, unused-ignore]
            from paho.mqtt.properties import Properties  # type: ignore[import-not-found, import-untyped, unused-ignore]
        except ImportError as error:
            raise AccmonError("accmon.fleet needs python3-paho-mqtt (apt install python3-paho-mqtt)") from error
        self._Properties, self._PacketTypes = Properties, PacketTypes
        self.username, self.prefix = username, prefix
        self._lock = threading.Condition()
        self._inbox: List[Dict[str, Any]] = []
        self._held: List[FleetClaim] = []
        self._retained: Dict[str, bytes] = {}
        #: Census answers by host name, for the correlation data of the census running (docs/MQTT.md §5).
        self._census: Dict[str, Dict[str, Any]] = {}
        self._census_correlation = b""
        self._client_id = f"accmon-py-{uuid.uuid4().hex[:12]}"
        self._client = mqtt.Client(client_id=self._client_id, protocol=mqtt.MQTTv5)
        self._client.username_pw_set(username, password)
        if ca is not None or port == 8883:
            self._client.tls_set(ca_certs=ca)
        self._client.on_message = self._on_message
        self._client.connect(broker, port, keepalive)
        self._client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client.loop_start()
        self._client.subscribe(f"{prefix}/+/claim-replies/{_level(username)}/#", qos=1)
        self._stopping = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="accmon-fleet-renew", daemon=True)
        self._renewer.start()

    def __enter__(self) -> "FleetClaimer":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases what is held, then disconnects."""
        for claim in list(self._held):
            claim.release()
        self._stopping.set()
        self._client.loop_stop()
        self._client.disconnect()

    # Requests

    def _on_message(self, _client: Any, _userdata: Any, message: Any) -> None:
        with self._lock:
            if message.topic == self._census_topic:
                correlation = getattr(getattr(message, "properties", None), "CorrelationData", None)
                try:
                    answer = json.loads(message.payload)
                except ValueError:
                    return
                if correlation == self._census_correlation and isinstance(answer, dict) and "host" in answer:
                    self._census[str(answer["host"])] = answer
            elif "/claim-replies/" not in message.topic:
                self._retained[message.topic] = bytes(message.payload)
            else:
                try:
                    reply = json.loads(message.payload)
                except ValueError:
                    return
                self._inbox.append(reply)
                for claim in self._held:
                    if reply.get("claimID") == claim.claim_id and reply.get("host") == claim.host and "nonce" not in reply:
                        claim.notices.append(reply)
                        if reply.get("kind") in ENDING_KINDS:
                            claim.ended = str(reply["kind"])
            self._lock.notify_all()

    def _send(self, host: str, request: Dict[str, Any]) -> str:
        nonce = uuid.uuid4().hex
        properties = self._Properties(self._PacketTypes.PUBLISH)
        properties.MessageExpiryInterval = 30
        properties.ResponseTopic = f"{self.prefix}/{_level(host)}/claim-replies/{_level(self.username)}/python"
        properties.CorrelationData = nonce.encode()
        self._client.publish(f"{self.prefix}/{_level(host)}/claim-requests/{_level(self.username)}",
                             json.dumps(dict(request, nonce=nonce)), qos=1, properties=properties)  # fmt: skip
        return nonce

    def _ask(self, host: str, request: Dict[str, Any], timeout: float = 10) -> Optional[Dict[str, Any]]:
        nonce = self._send(host, request)
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for reply in self._inbox:
                    if reply.get("nonce") == nonce:
                        self._inbox.remove(reply)
                        return reply
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(left)

    @property
    def _census_topic(self) -> str:
        return f"{self.prefix}/$readers/{_level(self._client_id)}/census"

    def census(self, wait: float = 0.5) -> Dict[str, Dict[str, Any]]:
        """The online bridges' answers to a census (docs/MQTT.md §5), by host name: ``{"host", "accessories" (the
        count of its accessory topics), "digest", "status"}``; a host whose bridge is online answers even where the
        broker's retained store does not give its status (a cluster node). The bridges spread their answers over
        the request's window, `wait` less 0.2 s for the last ones to arrive, so that a large fleet's answers do not
        overflow the broker's queue for this client."""
        with self._lock:
            self._census = {}
            self._census_correlation = uuid.uuid4().hex.encode()
            correlation = self._census_correlation
        self._client.subscribe(self._census_topic, qos=0)
        properties = self._Properties(self._PacketTypes.PUBLISH)
        properties.MessageExpiryInterval = 5
        properties.ResponseTopic = self._census_topic
        properties.CorrelationData = correlation
        request = json.dumps({"window": round(max(0.0, wait - 0.2), 3)})
        self._client.publish(f"{self.prefix}/$census/{_level(self._client_id)}", request, qos=0, properties=properties)
        time.sleep(wait)
        with self._lock:
            return dict(self._census)

    def hosts(self, wait: float = 0.5) -> List[str]:
        """The hosts online, by name: those whose retained status is online, and those whose bridge answers a census
        (:meth:`census`), during `wait` seconds."""
        self._client.subscribe(f"{self.prefix}/+/status", qos=0)
        answers = self.census(wait)
        self._client.unsubscribe(f"{self.prefix}/+/status")
        online = {name for name, answer in answers.items()
                  if isinstance(answer.get("status"), dict) and answer["status"].get("state") == "online"}  # fmt: skip
        with self._lock:
            for topic, payload in self._retained.items():
                try:
                    state = json.loads(payload).get("state")
                except ValueError:
                    continue
                if state == "online":
                    online.add(topic[len(self.prefix) + 1:].split("/")[0])
        return sorted(online)

    def claim(self, host: Optional[str] = None, *, serial: Optional[str] = None, kind: Optional[str] = None,
              vendor: Optional[str] = None, product: Optional[str] = None, connections: Optional[List[int]] = None,
              count: int = 1, wait: bool = False, timeout: Optional[float] = None, reason: str = "") -> FleetClaim:  # fmt: skip
        """Claims on `host` (a host name as published: no percent-encoding), or on the first online host that grants.
        Raises :class:`ClaimConflict` when held (without `wait`, or after `timeout`), :class:`PermissionDenied`,
        or :class:`AccmonError`."""
        request: Dict[str, Any] = {"op": "claim", "reason": reason}
        if connections:
            request["connections"] = connections
        else:
            fields = {"kind": kind, "vendorID": vendor, "productID": product}
            request.update(filter={k: v for k, v in fields.items() if v is not None}, count=count)
            if serial is not None:
                request["serial"] = serial
        refusals: List[Dict[str, Any]] = []
        for name in [host] if host is not None else self.hosts():
            reply = self._ask(name, dict(request, wait=wait))
            if reply is None:
                refusals.append({"host": name, "code": "unavailable", "message": f"host '{name}' did not answer"})
                continue
            if reply.get("kind") == "held":
                return self._hold(reply)
            if reply.get("kind") == "waiting":
                return self._await_grant(reply, timeout)
            refusals.append(reply)
        self._raise(refusals)

    def _hold(self, reply: Dict[str, Any]) -> FleetClaim:
        claim = FleetClaim(self, reply)
        with self._lock:
            self._held.append(claim)
        return claim

    def _await_grant(self, waiting: Dict[str, Any], timeout: Optional[float]) -> FleetClaim:
        place = self._hold(waiting)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                for notice in place.notices:
                    if notice.get("kind") == "granted":
                        place.accessories = list(notice.get("accessories") or [])
                        return place
                if place.ended is not None:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._lock.wait(left if left is not None else 1.0)
        place.release()
        raise ClaimConflict(f"claim: still not free on {place.host}", code="claim-conflict")

    def _raise(self, refusals: List[Dict[str, Any]]) -> NoReturn:
        for reply in refusals:
            if reply.get("code") == "claim-conflict":
                holders = "; ".join(f"{h['claimID']} by {h['holder'].get('user')} on {reply['host']}"
                                    for h in reply.get("holders") or [])  # fmt: skip
                raise ClaimConflict(f"claim: held: {holders}", code="claim-conflict")
        for reply in refusals:
            if reply.get("code") == "permission-denied":
                raise PermissionDenied(str(reply.get("message")))
        raise AccmonError("; ".join(f"{r.get('host')}: {r.get('message')}" for r in refusals) or "claim: no host")

    # Leases

    def _renew_loop(self) -> None:
        while not self._stopping.wait(1.0):
            with self._lock:
                held = [claim for claim in self._held if claim.ended is None]
            now = time.monotonic()
            by_host: Dict[str, List[str]] = {}
            for claim in held:
                if now - claim._renewed >= claim.renew_seconds:
                    claim._renewed = now
                    by_host.setdefault(claim.host, []).append(claim.claim_id)
            for host, claim_ids in by_host.items():
                self._send(host, {"op": "renew", "claimIDs": claim_ids})

    def _release(self, claim: FleetClaim) -> None:
        with self._lock:
            if claim in self._held:
                self._held.remove(claim)
        self._ask(claim.host, {"op": "release", "claimIDs": [claim.claim_id]}, timeout=5)
