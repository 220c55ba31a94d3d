"""The blocking client, for scripts and test suites: :class:`Client`.

.. code-block:: python

    with accmon.Client() as client:
        port = client.wait_for(kind="serial", vendor="0403", timeout=30).device_node
        for event in client.events(kind="usb"):
            print(event.change, event.accessory.name)
"""

from __future__ import annotations

import collections
import socket as socket_module
import time
from types import TracebackType
from typing import Any, Deque, Dict, Iterator, Optional, Sequence, Type

from .errors import ConnectionClosed, DaemonStopped, ProtocolError, WaitTimeout
from .filters import Filter, IdLike
from .model import Accessory, AccessoryEvent, Snapshot, Status
from .wire import LineBuffer, connect_error, decode, encode, expect_reply, hello_request, resolve_socket
from .wire import simulated_accessory

__all__ = ["Client", "BlockingSubscription"]


class _BlockingLink:
    """One blocking connection: requests with their replies, and the events that arrive between them."""

    def __init__(self, path: str, client_name: Optional[str], timeout: Optional[float]) -> None:
        self.path = path
        self.timeout = timeout
        self._socket = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
        self._socket.settimeout(timeout)
        try:
            self._socket.connect(path)
        except OSError as error:
            self._socket.close()
            raise connect_error(path, error) from None
        self._lines = LineBuffer()
        self._pending_lines: Deque[bytes] = collections.deque()
        self._events: Deque[AccessoryEvent] = collections.deque()
        self._next_id = 1
        self._shutdown_reason: Optional[str] = None
        self._ended: Optional[ConnectionClosed] = None
        try:
            self.hello = self.request(hello_request(client_name, None), "hello")
        except BaseException:
            self.close()
            raise

    def request(self, message: Dict[str, Any], expected: str) -> Dict[str, Any]:
        """Sends `message` and returns its reply, which must be of type `expected`; events read meanwhile are kept."""
        request_id = self._next_id
        self._next_id += 1
        self._check_open(message["type"])
        try:
            self._socket.settimeout(self.timeout)
            self._socket.sendall(encode(dict(message, id=request_id)))
        except OSError as error:
            raise ConnectionClosed(f"accmon: {message['type']}: write to accmond: {error}") from None
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply is None:  # a daemon this late is stuck: the connection is given up
                self._ended = ConnectionClosed(f"accmon: {message['type']}: no reply from accmond within {self.timeout} s")
                self.close()
                raise self._ended
            kind = reply["type"]
            if kind == "connect" or kind == "disconnect":
                self._events.append(AccessoryEvent.from_message(reply))
            elif reply.get("id") == request_id or (kind == "error" and reply.get("id") is None):
                return expect_reply(reply, expected, message["type"])

    def next_event(self, deadline: Optional[float]) -> Optional[AccessoryEvent]:
        """The next event; ``None`` when `deadline` (``time.monotonic()``) passes first."""
        while not self._events:
            message = self._read_message(deadline)
            if message is None:
                return None
            if message["type"] in ("connect", "disconnect"):
                return AccessoryEvent.from_message(message)
        return self._events.popleft()

    def _read_message(self, deadline: Optional[float]) -> Optional[Dict[str, Any]]:
        """The next message that is not blank or ``shutdown``; ``None`` at the deadline."""
        while True:
            if self._pending_lines:
                message = decode(self._pending_lines.popleft())
                if message is None:
                    continue
                if message["type"] == "shutdown":
                    reason = message.get("reason")
                    self._shutdown_reason = reason if isinstance(reason, str) else "the daemon is shutting down"
                    continue
                return message
            self._check_open("read")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            self._socket.settimeout(remaining)
            try:
                data = self._socket.recv(65536)
            except socket_module.timeout:
                return None
            except OSError as error:
                self._ended = ConnectionClosed(f"accmon: connection to accmond lost: {error}")
                continue
            if not data:
                self._ended = (
                    DaemonStopped(self._shutdown_reason)
                    if self._shutdown_reason is not None
                    else ConnectionClosed("accmon: accmond closed the connection")
                )
                continue
            self._pending_lines.extend(self._lines.feed(data))

    def _check_open(self, what: str) -> None:
        if self._ended is not None:
            raise self._ended
        if self._socket.fileno() < 0:
            raise ConnectionClosed(f"accmon: {what}: the connection is closed")

    def close(self) -> None:
        self._socket.close()


class BlockingSubscription:
    """A subscription of the blocking client: :attr:`snapshot`, then the events by iteration or :meth:`next_event`.

    It has a connection of its own; close it with :meth:`close` or by leaving ``with``.
    """

    def __init__(self, link: _BlockingLink, snapshot: Snapshot) -> None:
        self._link = link
        #: The accessories that matched when the subscription began.
        self.snapshot = snapshot

    def __enter__(self) -> "BlockingSubscription":
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[AccessoryEvent]:
        while True:
            event = self._link.next_event(None)
            if event is not None:
                yield event

    def next_event(self, timeout: Optional[float] = None) -> Optional[AccessoryEvent]:
        """The next event, waiting at most `timeout` seconds (``None``: as long as it takes); ``None`` on timeout.

        :raises ConnectionClosed: when the daemon goes away (:class:`~accmon.DaemonStopped` when it stops).
        """
        return self._link.next_event(None if timeout is None else time.monotonic() + timeout)

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
        self._link: Optional[_BlockingLink] = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the request connection (subscriptions have their own). Idempotent."""
        if self._link is not None:
            self._link.close()
            self._link = None

    def _request(self, message: Dict[str, Any], expected: str) -> Dict[str, Any]:
        if self._link is None:
            self._link = _BlockingLink(self.socket_path, self.client_name, self.timeout)
        return self._link.request(message, expected)

    def list(
        self,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        *,
        all: bool = False,
    ) -> Snapshot:
        """The accessories connected now that match, in connection order.

        :param all: also the accessories the manifest rejected (root and admins only).
        :raises DaemonUnreachable: when nothing listens on the socket.
        :raises PermissionDenied: when the socket refuses this user, or for ``all=True`` from a non-admin.
        """
        request: Dict[str, Any] = {"type": "list", "filter": Filter(kind, vendor, product, protocol).to_wire()}
        if all:
            request["all"] = True
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
    ) -> BlockingSubscription:
        """Subscribes on a connection of its own: the snapshot, then the live events."""
        request: Dict[str, Any] = {"type": "subscribe", "filter": Filter(kind, vendor, product, protocol).to_wire()}
        if all:
            request["all"] = True
        link = _BlockingLink(self.socket_path, self.client_name, self.timeout)
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
                event = subscription._link.next_event(deadline)
                if event is None:
                    wanted = Filter(kind, vendor, product, protocol).describe()
                    if serial is not None:
                        wanted = f"{wanted} serial={serial}" if wanted != "any accessory" else f"serial={serial}"
                    raise WaitTimeout(f"accmon: wait: no accessory matching {wanted} connected within {timeout} s")
                if event.change == "connect" and (serial is None or event.accessory.serial_number == serial):
                    return event.accessory
