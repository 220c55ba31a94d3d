"""The asyncio socket under a :class:`~accmon.Connection`: it writes requests, routes each reply to the request
that waits for it, each event and claim update to the subscription's queue and each claim notice to its claim's
channel, and stops reading while a consumer lags far behind.

Lines are framed and decoded in :meth:`Link.data_received`, on the event loop, with no task of its own.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any, Deque, Dict, Optional, Union

from .claim_model import ClaimInfo, ClaimNotice, ClaimUpdate
from .claim_state import ClaimState
from .errors import AccmonError, ConnectionClosed, DaemonStopped
from .model import AccessoryEvent
from .wire import LineBuffer, decode, encode

__all__ = ["END", "ClaimChannel", "Link", "Push", "PushQueue"]

#: What a push queue yields: an event, a claim update (subscriptions with claims), a raw ``restore`` / ``restored``
#: message (sessions only), or a claim notice (a claim's channel).
Push = Union[AccessoryEvent, ClaimUpdate, Dict[str, Any], ClaimNotice]


class _End:
    """The marker a push queue yields once it has finished normally."""

    def __repr__(self) -> str:
        return "END"


END = _End()

#: Past this many unconsumed pushes, the link stops reading the socket (while no request waits for a reply), so that
#: the daemon holds and coalesces the events instead of this process (docs/SESSIONS.md §1); it reads again below
#: RESUME_BELOW.
PAUSE_AT = 4096
RESUME_BELOW = 1024


class PushQueue:
    """The events (and restore messages) of one subscription, in the order they arrived.

    :meth:`get` returns :data:`END` once the queue has finished normally (unsubscribed, or the connection closed by
    this side), and raises the connection's error once it finished because the daemon went away, after every queued
    item has been taken.
    """

    def __init__(self, link: "Link") -> None:
        self._link = link
        self._items: Deque[Push] = collections.deque()
        self._waiter: Optional["asyncio.Future[None]"] = None
        self._finished = False
        self._error: Optional[AccmonError] = None

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Push) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def finish(self, error: Optional[AccmonError]) -> None:
        if self._finished:
            return
        self._finished = True
        self._error = error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Union[Push, _End]:
        """The next item; waits for one."""
        while not self._items:
            if self._finished:
                if self._error is not None:
                    raise self._error
                return END
            self._waiter = self._link.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if len(self._items) < RESUME_BELOW:
            self._link.resume_if_paused()
        return item


class ClaimChannel:
    """Where a claim's notices go: its :class:`~accmon.claim_state.ClaimState`, updated as each notice arrives, and the
    notices for the app to iterate (all but ``granted``, which the claim's return stands for). The iteration ends
    after the notice that ends the claim, or with the connection's error when the connection ends first."""

    def __init__(self, link: "Link", info: ClaimInfo) -> None:
        self.state = ClaimState(info)
        self.notices = PushQueue(link)
        #: Done once the claim no longer waits in line: granted, ended, or its connection gone.
        self.settled: "asyncio.Future[None]" = link.loop.create_future()
        #: Done once the claim has ended, been released, or its connection is gone.
        self.finished: "asyncio.Future[None]" = link.loop.create_future()
        if not self.state.waiting:
            self.settled.set_result(None)

    def deliver(self, notice: ClaimNotice) -> None:
        self.state.apply(notice)
        if notice.kind != "granted":
            self.notices.put(notice)
        if not self.state.waiting and not self.settled.done():
            self.settled.set_result(None)
        if notice.ends_claim:
            self.finish(None)

    def finish(self, error: Optional[AccmonError]) -> None:
        self.notices.finish(error)
        for future in (self.settled, self.finished):
            if not future.done():
                future.set_result(None)


class Link(asyncio.Protocol):
    """One connection's protocol object; see the module's documentation."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: Optional[asyncio.Transport] = None
        self._lines = LineBuffer()
        self._next_id = 1
        self._pending: "collections.OrderedDict[int, asyncio.Future[Dict[str, Any]]]" = collections.OrderedDict()
        #: Where events go; ``None`` while unsubscribed (the daemon then sends none).
        self.pushes: Optional[PushQueue] = None
        self._paused = False
        self._shutdown_reason: Optional[str] = None
        self._closed_by_user = False
        #: The channels of this connection's claims, by claim id.
        self.claims: Dict[str, ClaimChannel] = {}
        #: Why the connection ended, once it has.
        self.ended: Optional[AccmonError] = None
        self._ended_future: "asyncio.Future[None]" = loop.create_future()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            for line in self._lines.feed(data):
                message = decode(line)
                if message is not None:
                    self._dispatch(message)
        except AccmonError as error:
            self._end(error)
            if self.transport is not None:
                self.transport.abort()

    def eof_received(self) -> bool:
        return False  # close the transport: the daemon closes only when it is done with this connection

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._closed_by_user:
            self._end(None)
        elif self._shutdown_reason is not None:
            self._end(DaemonStopped(self._shutdown_reason))
        elif exc is not None:
            self._end(ConnectionClosed(f"accmon: connection to accmond lost: {exc}"))
        else:
            self._end(ConnectionClosed("accmon: accmond closed the connection"))

    def _dispatch(self, message: Dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "connect" or kind == "disconnect":
            if self.pushes is not None:
                self.pushes.put(AccessoryEvent.from_message(message))
                self._pause_if_lagging()
        elif kind == "claim-notice":
            notice = ClaimNotice.from_message(message)
            channel = self.claims.get(notice.claim_id)
            if channel is not None:
                channel.deliver(notice)
        elif kind == "claim-update":
            if self.pushes is not None:
                self.pushes.put(ClaimUpdate.from_message(message))
                self._pause_if_lagging()
        elif kind == "restore" or kind == "restored":
            if self.pushes is not None:
                self.pushes.put(message)
        elif kind == "shutdown":
            reason = message.get("reason")
            self._shutdown_reason = reason if isinstance(reason, str) else "the daemon is shutting down"
        else:
            request_id = message.get("id")
            waiter = self._pending.pop(request_id, None) if type(request_id) is int else None
            if waiter is None and kind == "error" and request_id is None and self._pending:
                # Errors about a line as a whole carry no id; replies come in order, so it is the oldest request's.
                waiter = self._pending.popitem(last=False)[1]
            if waiter is None:
                return  # an unknown message type of a later protocol version, or a reply nobody waits for
            if kind == "claim" and not waiter.done():
                # The channel exists before the claimer runs again, so that no notice that follows is missed.
                try:
                    info = ClaimInfo.from_json(message.get("claim"), "claim.claim")
                except AccmonError as error:
                    waiter.set_exception(error)
                    return
                self.claims[info.claim_id] = ClaimChannel(self, info)
            if not waiter.done():
                waiter.set_result(message)

    # Requests

    async def request(self, message: Dict[str, Any]) -> Dict[str, Any]:
        """Sends `message` with a fresh ``id`` and returns the daemon's reply (an ``error`` reply included).

        :raises ConnectionClosed: when the connection has ended or ends before the reply.
        """
        if self._closed_by_user or self.transport is None:
            raise ConnectionClosed(f"accmon: {message['type']}: the connection is closed")
        if self.ended is not None:
            raise self.ended
        request_id = self._next_id
        self._next_id += 1
        waiter: "asyncio.Future[Dict[str, Any]]" = self.loop.create_future()
        self._pending[request_id] = waiter
        self.transport.write(encode(dict(message, id=request_id)))
        self.resume_if_paused()  # the reply must be read, whatever the events queued before it
        try:
            return await waiter
        finally:
            self._pending.pop(request_id, None)

    def send(self, message: Dict[str, Any]) -> None:
        """Sends a line that gets no reply (``ack``); does nothing once the connection has ended."""
        if self.ended is None and not self._closed_by_user and self.transport is not None:
            self.transport.write(encode(message))

    def open_pushes(self) -> PushQueue:
        """Starts a new push queue for the next subscription (or restore), finishing the previous one."""
        if self.pushes is not None:
            self.pushes.finish(None)
        self.pushes = PushQueue(self)
        if self.ended is not None:
            self.pushes.finish(self.ended)
        return self.pushes

    def forget_claim(self, claim_id: str) -> None:
        """Stops following claim `claim_id` (released); its iteration ends after the notices already received."""
        channel = self.claims.pop(claim_id, None)
        if channel is not None:
            channel.finish(None)

    def close_pushes(self, queue: PushQueue) -> None:
        """Finishes `queue` (after ``unsubscribe``); events still in it are delivered first."""
        queue.finish(None)
        if self.pushes is queue:
            self.pushes = None

    # Flow control

    def _pause_if_lagging(self) -> None:
        if not self._paused and not self._pending and self.pushes is not None and len(self.pushes) >= PAUSE_AT:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.pause_reading()
                self._paused = True

    def resume_if_paused(self) -> None:
        if self._paused:
            self._paused = False
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

    # Ending

    @property
    def closed_here(self) -> bool:
        """Whether this side closed the connection."""
        return self._closed_by_user

    def close(self) -> None:
        """Closes the connection; waiting requests fail and the push queue finishes normally."""
        self._closed_by_user = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        elif self.ended is None and self.transport is None:
            self._end(None)

    async def wait_ended(self) -> None:
        """Returns once the connection has ended."""
        await asyncio.shield(self._ended_future)

    def _end(self, error: Optional[AccmonError]) -> None:
        if self._ended_future.done():
            return
        self.ended = error or ConnectionClosed("accmon: the connection was closed")
        pending = list(self._pending.values())
        self._pending.clear()
        for waiter in pending:
            if not waiter.done():
                waiter.set_exception(self.ended)
        if self.pushes is not None:
            self.pushes.finish(error)
        for channel in self.claims.values():
            channel.finish(error)
        self._ended_future.set_result(None)
