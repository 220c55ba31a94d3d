"""A subscription that survives restarts of the app and of the daemon: :class:`Session`, after ``AccmonSession``
and Core Bluetooth's state restoration (docs/SESSIONS.md).

.. code-block:: python

    async with accmon.Session("com.example.my-app", client_name="my-app") as session:
        for accessory in session.accessories:   # restored (session.restored) or present now
            show(accessory)
        async for event in session.events():    # acknowledged when the next one is asked for
            handle(event)
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Type, Union

from .connection import Connection, open_connection
from .errors import AccmonError, ProtocolError
from .link import END, PushQueue, _End
from .output_queue import OutputQueue
from .filters import Filter, IdLike
from .model import Accessory, AccessoryEvent, Snapshot
from .reconcile import SessionView, daemon_view

__all__ = ["ConnectionState", "Session"]

logger = logging.getLogger("accmon")

#: Backoff between reconnection attempts: 0.1 s, 0.2 s, 0.4 s, … up to this.
MAXIMUM_DELAY = 5.0


def reconnect_delay(attempt: int) -> float:
    """Seconds to wait before reconnection attempt `attempt` (from 1), as ``AccmonSession`` waits."""
    return min(0.05 * (1 << min(attempt, 7)), MAXIMUM_DELAY)


@dataclass(frozen=True)
class ConnectionState:
    """A change of a session's link to the daemon, for ``Session(on_state=...)``."""

    state: str
    """``"connected"``, ``"reconnecting"`` or ``"closed"``."""
    attempt: int = 0
    """For ``"reconnecting"``: the attempt number, from 1."""
    delay: float = 0.0
    """For ``"reconnecting"``: seconds until the attempt."""
    reason: str = ""
    """For ``"reconnecting"``: why the previous connection or attempt failed."""


class Session:
    """A session kept by accmond under `restore_id` across restarts of the app and of the daemon.

    On a first start the session subscribes, and :attr:`accessories` is what is connected now. When the app starts
    again with the same id (same user), the daemon hands back the kept session: :attr:`restored` is true,
    :attr:`accessories` is what the app knew as of its last acknowledged event, and :meth:`events` begins with what
    it missed, in order, then goes on live. An event is acknowledged when the app asks for the next one, so an app
    killed while handling an event gets it again after it restarts.

    When the connection to the daemon breaks, the session reconnects by itself, after 0.1 s, 0.2 s, 0.4 s, … up to
    5 s between attempts, then hands the app only the difference between what it has and the daemon's view, so that
    within one run of the app each change reaches it exactly once (docs/SESSIONS.md §6).

    :param restore_id: the id the daemon keeps the session under, for this user.
    :param client_name: a name for the daemon's logs and ``accmon status``.
    :param socket: the socket path; by default ``$ACCMON_SOCKET``, else ``/run/accmon/accmon.sock``.
    :param kind: filter of a first start (a restored session keeps the filter it had); see
        :meth:`Connection.subscribe <accmon.Connection.subscribe>`.
    :param on_state: called with a :class:`ConnectionState` at each change of the link (also logged on the
        ``accmon`` logger).
    :param relaunch: a systemd template (``accmon-NAME@.service``) the daemon starts for this user, as the instance
        named by the uid, when an event waits for the session while the app is not running; the manifest's
        ``relaunch`` must let this user register it (docs/SESSIONS.md §8).
    :raises ValueError: for a malformed filter.
    """

    def __init__(
        self,
        restore_id: str,
        client_name: Optional[str] = None,
        socket: Optional[str] = None,
        *,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        on_state: Optional[Callable[[ConnectionState], None]] = None,
        relaunch: Optional[str] = None,
    ) -> None:
        if not isinstance(restore_id, str) or not restore_id:
            raise ValueError("Session: restore_id: expected a non-empty string")
        self.restore_id = restore_id
        self.relaunch = relaunch
        self.client_name = client_name
        self.socket = socket
        self._filter = Filter(kind, vendor, product, protocol)
        self._on_state = on_state
        #: The accessories at start: restored (when :attr:`restored`) or connected now.
        self.accessories: List[Accessory] = []
        #: Whether the daemon handed back a kept session at start.
        self.restored = False
        self._view = SessionView()
        self._connection: Optional[Connection] = None
        self._output: Optional[OutputQueue] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._closing = False
        self._unsent_ack: Optional[int] = None

    async def __aenter__(self) -> "Session":
        await self.start()
        return self

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connects, restores or subscribes, and keeps the link up until :meth:`close`.

        :raises AccmonError: when the first connection fails (later failures are retried):
            :class:`~accmon.DaemonUnreachable`, :class:`~accmon.PermissionDenied`, or :class:`~accmon.ProtocolError`
            ``restore-id-in-use`` when another connection of this user holds the id.
        """
        if self._task is not None:
            raise RuntimeError("Session: already started")
        self._output = OutputQueue()
        connection = await open_connection(self.socket, self.client_name, self.restore_id, self.relaunch)
        try:
            await self._begin(connection)
        except BaseException:
            connection.close()
            raise
        self._task = asyncio.ensure_future(self._maintain(connection))

    @property
    def connected(self) -> bool:
        """Whether the link to the daemon is up now."""
        return self._connection is not None and not self._connection.closed

    @property
    def current(self) -> List[Accessory]:
        """The app's view: :attr:`accessories` with every event handed so far applied (consumed or not)."""
        return self._view.accessories

    def events(self) -> AsyncIterator[AccessoryEvent]:
        """The events after :attr:`accessories`, across reconnections; ends after :meth:`close`.

        Each event is acknowledged to the daemon when the next one is asked for.
        """
        return _Events(self)

    async def close(self) -> None:
        """Closes the link; the daemon keeps the session for the next start with the same id (until its retention
        ends, a day by default). :meth:`events` ends. Idempotent."""
        self._send_ack()  # what was consumed before closing stays consumed
        self._closing = True
        task, self._task = self._task, None
        if self._connection is not None:
            self._connection.close()
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._finish()

    async def forget(self) -> None:
        """Ends the session for good: unsubscribes, so the daemon does not keep it, then closes."""
        connection = self._connection
        self._closing = True
        if connection is not None and not connection.closed:
            try:
                await connection.unsubscribe()
            except AccmonError:
                pass  # the link went down meanwhile: the daemon keeps the session until its retention ends
        await self.close()

    # The link

    async def _begin(self, connection: Connection) -> None:
        """The first connection: a restore hands back the known accessories and queues the missed events; otherwise
        the subscription's snapshot is the start."""
        pushes = connection._link.pushes
        assert pushes is not None and self._output is not None
        if connection.restored:
            restore = await _next_restore_message(pushes, "restore")
            known = Snapshot.from_message(restore)
            self._view = SessionView(known, known.seq)
            self.accessories, self.restored = list(known), True
            while True:
                item = await _next_restore_item(pushes)
                if isinstance(item, AccessoryEvent):
                    self._hand(item)
                else:
                    break
        else:
            subscription = await connection.subscribe(
                self._filter.kind, self._filter.vendor, self._filter.product, self._filter.protocol
            )
            self._view = SessionView(subscription.snapshot, subscription.snapshot.seq)
            self.accessories, self.restored = list(subscription.snapshot), False
        self._connection = connection
        self._state(ConnectionState("connected"))

    async def _maintain(self, connection: Connection) -> None:
        """Hands live events until the connection ends, then reconnects with backoff and reconciles; repeats."""
        attempt = 0
        try:
            while not self._closing:
                reason = await self._forward(connection)
                self._connection = None
                while not self._closing:
                    attempt += 1
                    delay = reconnect_delay(attempt)
                    self._state(ConnectionState("reconnecting", attempt, delay, reason))
                    await asyncio.sleep(delay)
                    try:
                        connection = await open_connection(self.socket, self.client_name, self.restore_id, self.relaunch)
                    except AccmonError as error:
                        reason = str(error)
                        continue
                    try:
                        await self._reconcile(connection)
                    except AccmonError as error:
                        connection.close()
                        reason = str(error)
                        continue
                    except BaseException:  # closed meanwhile: the new connection goes too
                        connection.close()
                        raise
                    attempt = 0
                    self._state(ConnectionState("connected"))
                    break
        except Exception as error:  # a defect, or a daemon that breaks the protocol: the consumer must hear of it
            if self._output is not None:
                self._output.fail(error)
            self._closing = True
            logger.error("accmon: session %r ended: %s", self.restore_id, error)
        finally:
            self._finish()

    async def _forward(self, connection: Connection) -> str:
        """Hands the live events of `connection` to the app until it ends; returns why it ended."""
        pushes = connection._link.pushes
        while pushes is not None and self._output is not None:
            await self._output.room()
            try:
                item = await pushes.get()
            except AccmonError as error:
                return str(error)
            if item is END:
                break
            if isinstance(item, AccessoryEvent):
                self._hand(item)
        return str(connection._link.ended or "accmon: accmond closed the connection")

    async def _reconcile(self, connection: Connection) -> None:
        """Learns the daemon's view of the session (restored, or a fresh snapshot when the daemon lost it) and hands
        the app the difference from what it has."""
        pushes = connection._link.pushes
        assert pushes is not None
        if connection.restored:
            restore = Snapshot.from_message(await _next_restore_message(pushes, "restore"))
            replay: List[AccessoryEvent] = []
            while True:
                item = await _next_restore_item(pushes)
                if isinstance(item, AccessoryEvent):
                    replay.append(item)
                else:
                    restored_seq = item.get("seq")
                    break
            truth, as_of = daemon_view(restore, restore.seq, replay, restored_seq if type(restored_seq) is int else 0)
        else:
            subscription = await connection.subscribe(
                self._filter.kind, self._filter.vendor, self._filter.product, self._filter.protocol
            )
            truth = {accessory.connection_id: accessory for accessory in subscription.snapshot}
            as_of = subscription.snapshot.seq
        assert self._output is not None
        for event in self._view.reconcile(truth, as_of, connection.restored):
            self._output.put(event)
        self._connection = connection

    def _hand(self, event: AccessoryEvent) -> None:
        if self._view.offer(event) and self._output is not None:
            self._output.put(event)

    def _acknowledge(self, seq: int) -> None:
        """Acknowledges every event up to `seq`. The ``ack`` line is written when the event loop next turns, so that
        the events an app consumes back to back cost one line."""
        first = self._unsent_ack is None
        self._unsent_ack = seq if first else max(seq, self._unsent_ack or 0)
        if first:
            asyncio.get_running_loop().call_soon(self._send_ack)

    def _send_ack(self) -> None:
        seq, self._unsent_ack = self._unsent_ack, None
        connection = self._connection
        if connection is not None and seq is not None:
            connection._link.send({"type": "ack", "seq": seq})

    def _state(self, state: ConnectionState) -> None:
        if state.state == "reconnecting":
            logger.info("accmon: %s; reconnecting (attempt %d, in %.1f s)", state.reason, state.attempt, state.delay)
        else:
            logger.info("accmon: session %r: %s", self.restore_id, state.state)
        if self._on_state is not None:
            self._on_state(state)

    def _finish(self) -> None:
        if self._output is not None and self._closing:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._output.put(END)
            self._state(ConnectionState("closed"))
            self._output = None


class _Events:
    """The iterator of :meth:`Session.events`: acknowledges the previous event, then waits for the next."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._previous: Optional[int] = None

    def __aiter__(self) -> "_Events":
        return self

    async def __anext__(self) -> AccessoryEvent:
        session = self._session
        if self._previous is not None:
            session._acknowledge(self._previous)
            self._previous = None
        output = session._output
        if output is None:
            raise StopAsyncIteration
        item = await output.get()
        if isinstance(item, _End):
            raise StopAsyncIteration
        self._previous = item.seq
        return item


async def _next_restore_item(pushes: PushQueue) -> Union[AccessoryEvent, Dict[str, Any]]:
    """The next replayed event, or the ``restored`` marker."""
    while True:
        item = await pushes.get()
        if isinstance(item, AccessoryEvent):
            return item
        if isinstance(item, dict) and item.get("type") == "restored":
            return item
        if item is END:
            raise ProtocolError("invalid-response", "accmon: restore: the connection ended during the restore")


async def _next_restore_message(pushes: PushQueue, kind: str) -> Dict[str, Any]:
    item = await pushes.get()
    if not isinstance(item, dict) or item.get("type") != kind:
        raise ProtocolError("invalid-response", f"accmon: restore: accmond did not send the '{kind}' message first")
    return item
