"""The blocking client, for scripts and test suites: :class:`Client`.

.. code-block:: python

    with accmon.Client() as client:
        port = client.wait_for(kind="serial", vendor="0403", timeout=30).device_node
        for event in client.events(kind="usb"):
            print(event.change, event.accessory.name)

A client is safe to share between threads: its requests take turns on its connection.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Type, Union

from .blocking_claim import BlockingClaim, ClaimLink, start_claim
from .blocking_link import BlockingLink, Change
from .claim_model import ClaimInfo, ClaimList, ClaimNotice, ClaimSummary, ClaimUpdate
from .claim_requests import ClaimTarget, ReleaseTarget, claim_request, release_request
from .errors import ProtocolError, WaitTimeout
from .filters import Filter, IdLike
from .model import Accessory, AccessoryEvent, Snapshot, Status
from .wire import resolve_socket, simulated_accessory

__all__ = ["Client", "BlockingSubscription"]


class BlockingSubscription:
    """A subscription of the blocking client: :attr:`snapshot`, then the events by iteration or :meth:`next_event`.

    It has a connection of its own; close it with :meth:`close` or by leaving ``with``.
    """

    def __init__(self, link: BlockingLink, snapshot: Snapshot) -> None:
        self._link = link
        #: The accessories that matched when the subscription began.
        self.snapshot = snapshot
        #: For ``claims=True``: the claim on each claimed accessory, by connection id, as of the last event or update
        #: taken (the snapshot's, then each ``claim-update``).
        self.claims: Dict[int, ClaimSummary] = dict(snapshot.claims)

    def __enter__(self) -> "BlockingSubscription":
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[AccessoryEvent]:
        while True:
            event = self.next_event(None)
            if event is not None:
                yield event

    def next_event(self, timeout: Optional[float] = None) -> Optional[AccessoryEvent]:
        """The next event, waiting at most `timeout` seconds (``None``: as long as it takes); ``None`` on timeout.
        Claim updates taken meanwhile update :attr:`claims`.

        :raises ConnectionClosed: when the daemon goes away (:class:`~accmon.DaemonStopped` when it stops).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            change = self._next_change(deadline)
            if change is None or isinstance(change, AccessoryEvent):
                return change

    def next_change(self, timeout: Optional[float] = None) -> Optional[Change]:
        """The next event or, with ``claims=True``, claim update (:class:`~accmon.ClaimUpdate`), in the order accmond
        sent them; ``None`` on timeout."""
        return self._next_change(None if timeout is None else time.monotonic() + timeout)

    def changes(self) -> Iterator[Change]:
        """The events and claim updates, blocking, in order."""
        while True:
            change = self._next_change(None)
            if change is not None:
                yield change

    def _next_change(self, deadline: Optional[float]) -> Optional[Change]:
        change = self._link.next_change(deadline)
        if isinstance(change, ClaimUpdate):
            if change.claim is None:
                self.claims.pop(change.connection_id, None)
            else:
                self.claims[change.connection_id] = change.claim
        elif isinstance(change, AccessoryEvent) and change.change == "disconnect":
            self.claims.pop(change.accessory.connection_id, None)
        return change

    def close(self) -> None:
        """Closes the subscription's connection."""
        self._link.close()


class Client:
    """A blocking client of accmond.

    Requests (:meth:`list`, :meth:`status`, …) share one connection, opened on first use; each subscription
    (:meth:`subscribe`, :meth:`events`, :meth:`wait_for`) has a connection of its own. Use it with ``with``, or call
    :meth:`close`.

    :param socket: the socket path; by default ``$ACCMON_SOCKET``, else ``/run/accmon/accmon.sock``.
    :param client_name: a name for the daemon's logs and ``accmon status``.
    :param timeout: seconds to wait for the connection and for each reply (``None``: no limit).
    """

    def __init__(
        self, socket: Optional[str] = None, client_name: Optional[str] = None, timeout: Optional[float] = 30.0
    ) -> None:
        self.socket_path = resolve_socket(socket)
        self.client_name = client_name
        self.timeout = timeout
        self._link: Optional[BlockingLink] = None
        self._lock = threading.Lock()

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the request connection (subscriptions and claims have their own). Idempotent."""
        with self._lock:
            if self._link is not None:
                self._link.close()
                self._link = None

    def _request(self, message: Dict[str, Any], expected: str) -> Dict[str, Any]:
        # One request at a time on the shared connection: its replies are read by the thread that waits for them.
        with self._lock:
            if self._link is None:
                self._link = BlockingLink(self.socket_path, self.client_name, self.timeout)
            return self._link.request(message, expected)

    def list(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
        claims: bool = False,
    ) -> Snapshot:
        """The accessories connected now that match, in connection order.

        :param all: also the accessories the manifest rejected (root and admins only).
        :param claims: also the claim on each claimed accessory (:attr:`~accmon.Snapshot.claims`).
        :raises DaemonUnreachable: when nothing listens on the socket.
        :raises PermissionDenied: when the socket refuses this user, or for ``all=True`` from a non-admin.
        """
        request: Dict[str, Any] = {"type": "list", "filter": Filter(kind, vendor, product, protocol).to_wire()}
        if all:
            request["all"] = True
        if claims:
            request["claims"] = True
        return Snapshot.from_message(self._request(request, "list"))

    def status(self) -> Status:
        """The daemon's status (docs/PROTOCOL.md §7.6)."""
        return Status.from_message(self._request({"type": "status"}, "status"))

    def reload_manifest(self) -> None:
        """Asks the daemon to read its manifest again (root and admins only)."""
        self._request({"type": "reload"}, "ok")

    def simulate_connect(
        self,
        kind: str,
        *,
        vendor: IdLike = None,
        product: IdLike = None,
        name: str = "",
        manufacturer: str = "",
        model: str = "",
        serial: str = "",
        firmware: str = "",
        hardware: str = "",
        protocols: Sequence[str] = (),
        nodes: Sequence[str] = (),
        sysfs: str = "",
        port: str = "",
        interface: str = "",
        accessory_id: Optional[str] = None,
    ) -> int:
        """Plugs in a simulated accessory (accmond with ``--simulate``; root and admins); returns its connection id.

        The options are those of ``accmon simulate connect``.
        """
        accessory = simulated_accessory(
            kind, vendor=vendor, product=product, name=name, manufacturer=manufacturer, model=model, serial=serial,
            firmware=firmware, hardware=hardware, protocols=protocols, nodes=nodes, sysfs=sysfs, port=port,
            interface=interface, accessory_id=accessory_id,
        )  # fmt: skip
        reply = self._request({"type": "simulate", "action": "connect", "accessory": accessory}, "ok")
        connection_id = reply.get("connectionID")
        if type(connection_id) is not int:
            raise ProtocolError("invalid-response", "accmon: simulate: accmond did not name the connection")
        return connection_id

    def simulate_disconnect(self, connection_id: int) -> None:
        """Unplugs a simulated accessory.

        :raises ProtocolError: ``no-such-connection`` when it is not a connected simulated accessory.
        """
        self._request({"type": "simulate", "action": "disconnect", "connectionID": connection_id}, "ok")

    def subscribe(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
        claims: bool = False,
    ) -> BlockingSubscription:
        """Subscribes on a connection of its own: the snapshot, then the live events; with `claims`, also who holds
        each accessory (:attr:`BlockingSubscription.claims`, :meth:`BlockingSubscription.changes`)."""
        request: Dict[str, Any] = {"type": "subscribe", "filter": Filter(kind, vendor, product, protocol).to_wire()}
        if all:
            request["all"] = True
        if claims:
            request["claims"] = True
        link = BlockingLink(self.socket_path, self.client_name, self.timeout)
        try:
            return BlockingSubscription(link, Snapshot.from_message(link.request(request, "snapshot")))
        except BaseException:
            link.close()
            raise

    def events(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
    ) -> Iterator[AccessoryEvent]:
        """Yields the connect and disconnect events from now on, until the daemon stops (then it raises
        :class:`~accmon.DaemonStopped`); closing the generator closes its connection. The accessories connected
        already are not reported: use :meth:`subscribe` for them too.

        The subscription is made when this is called, so no event after the call is missed.
        """
        subscription = self.subscribe(kind, vendor, product, protocol, all=all)
        return self._iterate(subscription)

    @staticmethod
    def _iterate(subscription: BlockingSubscription) -> Iterator[AccessoryEvent]:
        with subscription:
            yield from subscription

    def wait_for(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        serial: Optional[str] = None,
        timeout: Optional[float] = None,
        *,
        protocol: Optional[str] = None,
    ) -> Accessory:
        """Waits until an accessory that matches is connected, and returns it: at once when one is connected already
        (the first in connection order), else the first to connect.

        :param serial: the serial number it must have, exactly (for Bluetooth HID: its address).
        :param timeout: seconds to wait at most (``None``: as long as it takes).
        :raises WaitTimeout: when none is connected within `timeout` (a :class:`TimeoutError` too).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.subscribe(kind, vendor, product, protocol) as subscription:
            for accessory in subscription.snapshot:
                if serial is None or accessory.serial_number == serial:
                    return accessory
            while True:
                event = subscription._next_change(deadline)
                if isinstance(event, ClaimUpdate):
                    continue
                if event is None:
                    wanted = Filter(kind, vendor, product, protocol).describe()
                    if serial is not None:
                        wanted = f"{wanted} serial={serial}" if wanted != "any accessory" else f"serial={serial}"
                    raise WaitTimeout(f"accmon: wait: no accessory matching {wanted} connected within {timeout} s")
                if event.change == "connect" and (serial is None or event.accessory.serial_number == serial):
                    return event.accessory

    def claim(
        self,
        *connections: Union[ClaimTarget, Sequence[ClaimTarget]],
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        serial: Optional[str] = None,
        count: Optional[int] = None,
        token: Optional[str] = None,
        wait: bool = False,
        timeout: Optional[float] = None,
        reason: str = "",
        max_seconds: Optional[float] = None,
        on_notice: Optional[Callable[[ClaimNotice], None]] = None,
        on_waiting: Optional[Callable[[ClaimInfo], None]] = None,
    ) -> BlockingClaim:
        """Claims accessories for exclusive use, all or none, on a connection of its own; returns once the claim holds
        (after waiting in line, with `wait`). Use it with ``with`` (released at the end of the block), or call
        :meth:`BlockingClaim.release`.

        The arguments are those of the asyncio ``Connection.claim``, and the same errors are raised; `on_notice` is
        called on the claim's reader thread with each notice as it arrives (the notices are also queued for
        iteration).
        """
        request = claim_request(connections, kind=kind, vendor=vendor, product=product, protocol=protocol,
                                serial=serial, count=count, token=token, wait=wait, timeout=timeout, reason=reason,
                                max_seconds=max_seconds)  # fmt: skip
        link = ClaimLink(self.socket_path, self.client_name, self.timeout)
        return start_claim(link, request, timeout, on_notice, on_waiting)

    def claims(self) -> ClaimList:
        """The claims and the claimers waiting in line, on the accessories this client sees (and its user's own)."""
        return ClaimList.from_message(self._request({"type": "claims"}, "claims"))

    def release(self, target: ReleaseTarget, *, force: bool = False, reason: str = "") -> None:
        """Releases a claim by connection id, accessory, claim id or claim object; with `force` (admins), breaks
        another's, telling its holder `reason` (as the asyncio ``Connection.release``)."""
        self._request(release_request(target, force, reason), "ok")
