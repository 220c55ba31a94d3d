"""The blocking client's connection: :class:`BlockingLink` sends a request and reads until its reply, keeping the
events and claim updates read meanwhile for the subscription that iterates them."""

from __future__ import annotations

import collections
import socket as socket_module
import time
from typing import Any, Deque, Dict, Optional, Union

from .claim_model import ClaimUpdate
from .errors import ConnectionClosed, DaemonStopped
from .model import AccessoryEvent
from .wire import LineBuffer, connect_error, decode, encode, expect_reply, hello_request

__all__ = ["BlockingLink", "Change"]

#: What a subscription yields: an event, or (with ``claims=True``) a claim update.
Change = Union[AccessoryEvent, ClaimUpdate]


def _change(message: Dict[str, Any]) -> Optional[Change]:
    kind = message["type"]
    if kind == "connect" or kind == "disconnect":
        return AccessoryEvent.from_message(message)
    if kind == "claim-update":
        return ClaimUpdate.from_message(message)
    return None


class BlockingLink:
    """One blocking connection: requests with their replies, and the events (and claim updates) that arrive between
    them. Not safe across threads: :class:`~accmon.Client` serializes its requests with a lock."""

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
        self._events: Deque[Change] = collections.deque()
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
            change = _change(reply)
            if change is not None:
                self._events.append(change)
            elif reply.get("id") == request_id or (kind == "error" and reply.get("id") is None):
                return expect_reply(reply, expected, message["type"])

    def next_change(self, deadline: Optional[float]) -> Optional[Change]:
        """The next event or claim update; ``None`` when `deadline` (``time.monotonic()``) passes first."""
        while not self._events:
            message = self._read_message(deadline)
            if message is None:
                return None
            change = _change(message)
            if change is not None:
                return change
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
