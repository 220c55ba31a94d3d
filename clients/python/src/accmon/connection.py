"""The asyncio client: :func:`connect`, :class:`Connection` and :class:`Subscription`.

.. code-block:: python

    async with accmon.connect(client_name="my-app") as conn:
        sub = await conn.subscribe(kind="serial")
        for accessory in sub.snapshot:
            print("present:", accessory.name, accessory.device_node)
        async for event in sub:
            print(event.change, event.accessory.name)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, Generator, Optional, Sequence, Type, Union

from .claim import Claiming, make_claim
from .claim_model import ClaimInfo, ClaimList, ClaimSummary, ClaimUpdate
from .claim_requests import ClaimTarget, ReleaseTarget, claim_request, release_request
from .errors import AccmonError, ProtocolError
from .link import END, Link, PushQueue
from .filters import Filter, IdLike
from .model import AccessoryEvent, Snapshot, Status
from .wire import connect_error, expect_reply, hello_request, resolve_socket, simulated_accessory

__all__ = ["Connection", "Subscription", "connect"]


class Subscription:
    """A subscription: :attr:`snapshot`, then the live events as an asynchronous iterator.

    No accessory is missing from or repeated between the snapshot and the events (docs/PROTOCOL.md §6). Iteration
    ends after :meth:`Connection.unsubscribe` or when the connection is closed, and raises
    :class:`~accmon.ConnectionClosed` (or :class:`~accmon.DaemonStopped`) when the daemon goes away.
    """

    def __init__(self, connection: "Connection", snapshot: Snapshot, pushes: PushQueue) -> None:
        self._connection = connection
        self._pushes = pushes
        #: The accessories that matched when the subscription began, with the snapshot's sequence number.
        self.snapshot = snapshot
        #: For ``claims=True``: the claim on each claimed accessory, by connection id, as of the last event or update
        #: iterated (the snapshot's, then each ``claim-update``).
        self.claims: Dict[int, ClaimSummary] = dict(snapshot.claims)

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> AccessoryEvent:
        while True:
            item = await self._next_change()
            if isinstance(item, AccessoryEvent):
                return item

    async def _next_change(self) -> Union[AccessoryEvent, ClaimUpdate]:
        while True:
            item = await self._pushes.get()
            if item is END:
                raise StopAsyncIteration
            if isinstance(item, AccessoryEvent):
                if item.change == "disconnect":
                    self.claims.pop(item.accessory.connection_id, None)
                return item
            if isinstance(item, ClaimUpdate):
                if item.claim is None:
                    self.claims.pop(item.connection_id, None)
                else:
                    self.claims[item.connection_id] = item.claim
                return item

    async def changes(self) -> AsyncIterator[Union[AccessoryEvent, ClaimUpdate]]:
        """The events and, for a subscription with ``claims=True``, the claim updates (:class:`~accmon.ClaimUpdate`:
        claimed by whom, released), in the order accmond sent them; :attr:`claims` follows them."""
        while True:
            try:
                yield await self._next_change()
            except StopAsyncIteration:
                return

    async def next_event(self, timeout: Optional[float] = None) -> Optional[AccessoryEvent]:
        """The next event, or ``None`` when none came within `timeout` seconds or the subscription ended."""
        try:
            return await asyncio.wait_for(self.__anext__(), timeout)
        except (asyncio.TimeoutError, StopAsyncIteration):
            return None

    async def close(self) -> None:
        """Unsubscribes (the same as :meth:`Connection.unsubscribe`)."""
        await self._connection.unsubscribe()


class Connection:
    """A connection to accmond; get one with :func:`connect`.

    One connection carries at most one subscription at a time, next to any number of requests (``list``,
    ``status``, …), which may be sent while a subscription is being iterated. Close it with :meth:`close` or by
    leaving ``async with``.
    """

    def __init__(self, link: Link, socket_path: str, hello: Dict[str, Any]) -> None:
        self._link = link
        self._subscription: Optional[Subscription] = None
        #: The socket path used.
        self.socket_path = socket_path
        #: The session id the daemon gave this connection (as in its logs and ``status``).
        self.session_id = str(hello.get("session", ""))
        #: The protocol version in use.
        self.protocol_version = int(hello.get("version", 1))
        #: The daemon's release, such as ``"0.1.0"``.
        self.daemon_version = str(hello.get("daemon", ""))
        #: Whether the daemon handed back a kept session for the restore id (see :class:`~accmon.Session`).
        self.restored = hello.get("restored") is True

    async def __aenter__(self) -> "Connection":
        return self

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        await self.aclose()

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (closed by either side)."""
        return self._link.ended is not None

    async def subscribe(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
        claims: bool = False,
    ) -> Subscription:
        """Subscribes to the accessories that match: returns the snapshot, then yields live events.

        :param kind: ``"usb"``, ``"serial"`` or ``"bluetooth-hid"``.
        :param vendor: a vendor id, hex (``"0403"``) or int.
        :param product: a product id, hex or int.
        :param protocol: a protocol string the accessory must speak.
        :param all: also the accessories the manifest rejected (root and the manifest's admins only); their events
            carry :attr:`~accmon.AccessoryEvent.rejection`.
        :param claims: also who holds each accessory: the snapshot's :attr:`~accmon.Snapshot.claims`, then each change
            as a :class:`~accmon.ClaimUpdate` (:meth:`Subscription.changes`, :attr:`Subscription.claims`).
        :raises ValueError: for a malformed filter, before anything is sent.
        :raises ProtocolError: ``already-subscribed`` when this connection is subscribed already.
        :raises PermissionDenied: for ``all=True`` from a client that is not an admin.
        """
        wire_filter = Filter(kind, vendor, product, protocol).to_wire()
        pushes = self._link.open_pushes()
        request: Dict[str, Any] = {"type": "subscribe", "filter": wire_filter}
        if all:
            request["all"] = True
        if claims:
            request["claims"] = True
        try:
            reply = expect_reply(await self._link.request(request), "snapshot", "subscribe")
        except AccmonError:
            self._link.close_pushes(pushes)
            raise
        self._subscription = Subscription(self, Snapshot.from_message(reply), pushes)
        return self._subscription

    async def unsubscribe(self) -> None:
        """Ends the subscription; its iteration ends after the events that arrived before.

        :raises ProtocolError: ``not-subscribed`` when there is no subscription.
        """
        expect_reply(await self._link.request({"type": "unsubscribe"}), "ok", "unsubscribe")
        if self._link.pushes is not None:
            self._link.close_pushes(self._link.pushes)
        self._subscription = None

    async def suspend(self) -> None:
        """Holds the subscription's events in the daemon, coalesced (a connection that comes and goes meanwhile is
        never reported), until :meth:`resume` (docs/SESSIONS.md §1)."""
        expect_reply(await self._link.request({"type": "suspend"}), "ok", "suspend")

    async def resume(self) -> None:
        """Delivers what was held since :meth:`suspend`, in order, then live events again."""
        expect_reply(await self._link.request({"type": "resume"}), "ok", "resume")

    async def list(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
        claims: bool = False,
    ) -> Snapshot:
        """The accessories connected now that match, in connection order (parameters as :meth:`subscribe`; with
        `claims`, the claim on each claimed accessory is in :attr:`~accmon.Snapshot.claims`)."""
        request: Dict[str, Any] = {"type": "list", "filter": Filter(kind, vendor, product, protocol).to_wire()}
        if all:
            request["all"] = True
        if claims:
            request["claims"] = True
        return Snapshot.from_message(expect_reply(await self._link.request(request), "list", "list"))

    async def status(self) -> Status:
        """The daemon's status: version, uptime, accessories, sessions (docs/PROTOCOL.md §7.6)."""
        return Status.from_message(expect_reply(await self._link.request({"type": "status"}), "status", "status"))

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
        on_waiting: Optional[Callable[[ClaimInfo], None]] = None,
    ) -> Claiming:
        """Claims accessories for exclusive use, all or none (docs/CLAIMS.md): the connections named (ids or
        :class:`~accmon.Accessory` objects), else `count` (default 1) accessories that match the filter (`kind`,
        `vendor`, `product`, `protocol` as :meth:`subscribe`, and `serial` exactly), or the claim `token` names (taken
        up again on this connection, after accmond restarted).

        Use it as ``async with conn.claim(...) as claim:`` (released at the end of the block) or
        ``claim = await conn.claim(...)``; the claim also ends with this connection.

        :param wait: when what is asked for is held, wait in line (first come, first served) instead of failing;
            cancelling the task gives the place up.
        :param timeout: wait at most this long (implies `wait`), then give the place up and raise
            :class:`~accmon.ClaimTimeout`.
        :param reason: why, told to the holders in the way and shown to everyone who sees the claim.
        :param max_seconds: the longest the claim may last (the manifest may cap it); it then ends with ``expired``.
        :param on_waiting: called once with the claim (its place in line, who is in the way) when it waits.
        :raises ValueError: for arguments that do not go together, before anything is sent.
        :raises ClaimConflict: what was asked for is held, and `wait` was not given (``.holders`` names them).
        :raises ProtocolError: ``no-such-connection``, ``no-match`` (fewer than `count` match), ``no-such-claim``
            (an unknown or expired token), ``enforcement-failed``; :class:`~accmon.PermissionDenied` when this user
            may not claim one of them; :class:`~accmon.ClaimCancelled` when a waiting claim can never be served.
        """
        request = claim_request(connections, kind=kind, vendor=vendor, product=product, protocol=protocol,
                                serial=serial, count=count, token=token, wait=wait, timeout=timeout, reason=reason,
                                max_seconds=max_seconds)  # fmt: skip
        return Claiming(lambda: make_claim(self._link, request, timeout, on_waiting))

    async def claims(self) -> ClaimList:
        """The claims and the claimers waiting in line, on the accessories this client sees (and its user's own)."""
        return ClaimList.from_message(expect_reply(await self._link.request({"type": "claims"}), "claims", "claims"))

    async def release(self, target: ReleaseTarget, *, force: bool = False, reason: str = "") -> None:
        """Releases a claim named by a connection id it holds, an accessory (id or object), its claim id (``"c-3"``)
        or a claim object: this user's own; with `force` (root and the manifest's admins), another's, which is then
        *broken*: its holder is told by whom and `reason`.

        :raises ProtocolError: ``no-such-claim``; :class:`~accmon.PermissionDenied` for another's claim without
            `force`, or `force` from a client that is not an admin.
        """
        expect_reply(await self._link.request(release_request(target, force, reason)), "ok", "release")

    async def reload_manifest(self) -> None:
        """Asks the daemon to read its manifest again (root and the manifest's admins only).

        :raises ProtocolError: ``manifest-invalid`` with every problem when the manifest is broken.
        """
        expect_reply(await self._link.request({"type": "reload"}), "ok", "reload")

    async def simulate_connect(
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
        """Plugs in a simulated accessory (accmond started with ``--simulate``; root and admins only).

        The options are those of ``accmon simulate connect``. Returns the new connection id.

        :raises ProtocolError: ``simulation-disabled`` when accmond runs without ``--simulate``.
        """
        accessory = simulated_accessory(
            kind, vendor=vendor, product=product, name=name, manufacturer=manufacturer, model=model, serial=serial,
            firmware=firmware, hardware=hardware, protocols=protocols, nodes=nodes, sysfs=sysfs, port=port,
            interface=interface, accessory_id=accessory_id,
        )  # fmt: skip
        request = {"type": "simulate", "action": "connect", "accessory": accessory}
        return _connection_id(expect_reply(await self._link.request(request), "ok", "simulate"))

    async def simulate_disconnect(self, connection_id: int) -> None:
        """Unplugs a simulated accessory.

        :raises ProtocolError: ``no-such-connection`` when it is not a connected simulated accessory.
        """
        request = {"type": "simulate", "action": "disconnect", "connectionID": connection_id}
        expect_reply(await self._link.request(request), "ok", "simulate")

    def close(self) -> None:
        """Closes the connection; requests still waiting fail, and the subscription's iteration ends. Idempotent."""
        self._link.close()

    async def aclose(self) -> None:
        """Closes the connection and waits until it is closed."""
        self._link.close()
        await self._link.wait_ended()

    async def wait_closed(self) -> None:
        """Returns once the connection has ended, closed by either side."""
        await self._link.wait_ended()


def _connection_id(reply: Dict[str, Any]) -> int:
    value = reply.get("connectionID")
    if type(value) is not int:
        raise ProtocolError("invalid-response", "accmon: simulate: accmond did not name the connection")
    return value


async def open_connection(
    socket: Optional[str], client_name: Optional[str], restore_id: Optional[str] = None, relaunch: Optional[str] = None
) -> Connection:
    """Connects and says ``hello``. With a `restore_id`, the push queue is open before ``hello``, so that a restore
    that follows the reply is not missed (see :class:`~accmon.Session`)."""
    path = resolve_socket(socket)
    loop = asyncio.get_running_loop()
    try:
        _, link = await loop.create_unix_connection(lambda: Link(loop), path)
    except OSError as error:
        raise connect_error(path, error) from None
    if restore_id is not None:
        link.open_pushes()
    try:
        reply = expect_reply(await link.request(hello_request(client_name, restore_id, relaunch)), "hello", "hello")
    except BaseException:
        link.close()
        raise
    return Connection(link, path, reply)


class _Connecting:
    """What :func:`connect` returns: await it for a :class:`Connection`, or use it with ``async with``."""

    def __init__(self, socket: Optional[str], client_name: Optional[str]) -> None:
        self._socket = socket
        self._client_name = client_name
        self._connection: Optional[Connection] = None

    def __await__(self) -> Generator[Any, None, Connection]:
        return open_connection(self._socket, self._client_name).__await__()

    async def __aenter__(self) -> Connection:
        self._connection = await open_connection(self._socket, self._client_name)
        return self._connection

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        if self._connection is not None:
            await self._connection.aclose()


def connect(socket: Optional[str] = None, client_name: Optional[str] = None) -> _Connecting:
    """Connects to accmond and negotiates the protocol version.

    Use it as ``async with accmon.connect() as conn:`` (the connection is closed at the end of the block) or as
    ``conn = await accmon.connect()``.

    :param socket: the socket path; by default ``$ACCMON_SOCKET``, else ``/run/accmon/accmon.sock``.
    :param client_name: a name for the daemon's logs and ``accmon status``.
    :raises DaemonUnreachable: when nothing listens on the socket (the message says whether accmond runs).
    :raises PermissionDenied: when the socket's permissions refuse this user.
    """
    return _Connecting(socket, client_name)
