"""Check-out for scripts: :class:`BlockingClaim`, what ``Client.claim`` gives.

.. code-block:: python

    with accmon.Client() as client, client.claim(kind="serial", wait=True, timeout=600) as claim:
        flash(claim.device_node)

A claim has a connection of its own, read by a thread of its own, so that its notices arrive (and its state follows
them) while the script does something else: a queue to iterate, and an optional callback.
"""

from __future__ import annotations

import logging
import queue
import socket as socket_module
import threading
import time
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Optional, Type, Union

from .claim_conflicts import ClaimTimeout
from .claim_model import ClaimInfo, ClaimNotice
from .claim_requests import release_request
from .claim_state import ClaimState, ClaimView
from .errors import AccmonError, ClaimCancelled, ConnectionClosed, DaemonStopped, ProtocolError
from .link import END, _End
from .wire import LineBuffer, connect_error, decode, encode, expect_reply, hello_request

__all__ = ["BlockingClaim", "ClaimLink"]

_logger = logging.getLogger("accmon")


class ClaimLink:
    """A connection read by a thread of its own: each reply goes to the request that waits for it, each claim notice
    to the handler (kept until one is attached, so none is missed)."""

    def __init__(
        self,
        path: str,
        client_name: Optional[str],
        timeout: Optional[float],
        connected: Optional[socket_module.socket] = None,
    ) -> None:
        self.timeout = timeout
        if connected is not None:  # a stream that leads to accmond (the pytest plugin's, through another user)
            self._socket = connected
        else:
            self._socket = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
            self._socket.settimeout(timeout)
            try:
                self._socket.connect(path)
            except OSError as error:
                self._socket.close()
                raise connect_error(path, error) from None
        self._socket.settimeout(None)
        self._condition = threading.Condition()
        self._replies: Dict[int, Dict[str, Any]] = {}
        self._next_id = 1
        self._handler: Optional[Callable[[ClaimNotice], None]] = None
        self._early: List[ClaimNotice] = []
        self._closed_here = False
        self._shutdown_reason: Optional[str] = None
        #: Why the connection ended, once it has.
        self.ended: Optional[AccmonError] = None
        self._on_end: Optional[Callable[[Optional[AccmonError]], None]] = None
        self._reader = threading.Thread(target=self._read, name="accmon-claim", daemon=True)
        self._reader.start()
        try:
            self.request(hello_request(client_name, None), "hello")
        except BaseException:
            self.close()
            raise

    def attach(self, handler: Callable[[ClaimNotice], None], on_end: Callable[[Optional[AccmonError]], None]) -> None:
        """Hands every notice, those that came already first, to `handler`; `on_end` is called once the connection
        ends (``None`` when this side closed it)."""
        with self._condition:
            early, self._early = self._early, []
            self._handler = handler
            self._on_end = on_end
            ended = self.ended
        for notice in early:
            handler(notice)
        if ended is not None:
            on_end(None if self._closed_here else ended)

    def request(self, message: Dict[str, Any], expected: str) -> Dict[str, Any]:
        """Sends `message` and waits for its reply, which must be of type `expected`."""
        with self._condition:
            if self.ended is not None:
                raise self.ended
            request_id = self._next_id
            self._next_id += 1
            try:
                self._socket.sendall(encode(dict(message, id=request_id)))
            except OSError as error:
                raise ConnectionClosed(f"accmon: {message['type']}: write to accmond: {error}") from None
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            while request_id not in self._replies:
                if self.ended is not None:
                    raise self.ended
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise ConnectionClosed(f"accmon: {message['type']}: no reply from accmond within {self.timeout} s")
                self._condition.wait(remaining)
            return expect_reply(self._replies.pop(request_id), expected, message["type"])

    def _read(self) -> None:
        lines = LineBuffer()
        error: Optional[AccmonError] = None
        try:
            while error is None:
                try:
                    data = self._socket.recv(65536)
                except OSError as failure:
                    error = ConnectionClosed(f"accmon: connection to accmond lost: {failure}")
                    break
                if not data:
                    break
                for line in lines.feed(data):
                    message = decode(line)
                    if message is not None:
                        self._dispatch(message)
        except AccmonError as failure:  # a line that is not the protocol
            error = failure
        if error is None:
            reason = self._shutdown_reason
            error = DaemonStopped(reason) if reason is not None else ConnectionClosed("accmon: accmond closed the connection")
        with self._condition:
            if self._closed_here:
                error = ConnectionClosed("accmon: the connection was closed")
            self.ended = error
            on_end = self._on_end
            self._condition.notify_all()
        if on_end is not None:
            on_end(None if self._closed_here else error)

    def _dispatch(self, message: Dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "claim-notice":
            notice = ClaimNotice.from_message(message)
            with self._condition:
                handler = self._handler
                if handler is None:
                    self._early.append(notice)
            if handler is not None:
                handler(notice)
        elif kind == "shutdown":
            reason = message.get("reason")
            self._shutdown_reason = reason if isinstance(reason, str) else "the daemon is shutting down"
        elif type(message.get("id")) is int or kind == "error":
            with self._condition:
                request_id = message.get("id")
                if type(request_id) is not int:  # an error about a line as a whole: the oldest request's
                    request_id = self._next_id - 1
                self._replies[request_id] = message
                self._condition.notify_all()

    def closing(self) -> None:
        """Says that this side ends the connection (by closing it, or by ending the process at its other end)."""
        with self._condition:
            self._closed_here = True

    def close(self) -> None:
        """Closes the connection (a claim still held on it ends) and waits for the reader to finish."""
        self.closing()
        try:
            self._socket.shutdown(socket_module.SHUT_RDWR)
        except OSError:
            pass  # not connected any more: the reader has ended or is ending
        if threading.current_thread() is not self._reader:
            self._reader.join(10)
        self._socket.close()


class BlockingClaim(ClaimView):
    """Accessories checked out for exclusive use (see :class:`~accmon.Claim`, its asyncio twin), on a connection of
    its own. Iterate it (or :meth:`notices`) for its notices, blocking; or give ``on_notice=`` to ``Client.claim``,
    called on the claim's reader thread as each notice arrives. The iteration ends after the notice that ends the
    claim or after :meth:`release`, and raises :class:`~accmon.ConnectionClosed` when accmond goes away first.

    :meth:`release` (or leaving ``with``) releases it and closes its connection.
    """

    def __init__(self, link: ClaimLink, info: ClaimInfo, on_notice: Optional[Callable[[ClaimNotice], None]]) -> None:
        self._link = link
        self._state = ClaimState(info)
        self._on_notice = on_notice
        self._queue: "queue.Queue[Union[ClaimNotice, _End, AccmonError]]" = queue.Queue()
        self._settled = threading.Event()
        self._finished = threading.Event()
        self._connection_error: Optional[AccmonError] = None
        if not self._state.waiting:
            self._settled.set()
        link.attach(self._deliver, self._end)

    def _deliver(self, notice: ClaimNotice) -> None:
        """On the reader thread: follows the notice, queues it, calls the callback."""
        if notice.claim_id != self._state.info.claim_id:
            return
        self._state.apply(notice)
        if not self._state.waiting:
            self._settled.set()
        if notice.kind != "granted":
            self._queue.put(notice)
            if self._on_notice is not None:
                try:
                    self._on_notice(notice)
                except Exception:  # the reader thread must go on: the callback's failure is the app's to see
                    _logger.exception("accmon: claim %s: the on_notice callback failed", self.claim_id)
        if notice.ends_claim:
            self._finish(END)

    def _end(self, error: Optional[AccmonError]) -> None:
        self._connection_error = error
        self._finish(END if error is None else error)

    def _finish(self, last: Union[_End, AccmonError]) -> None:
        if not self._finished.is_set():
            self._finished.set()
            self._settled.set()
            self._queue.put(last)

    @property
    def active(self) -> bool:
        """Whether the claim holds (or waits) still: not released, not ended, its connection open."""
        return not self._state.released and self._state.ended is None and self._link.ended is None

    def __iter__(self) -> Iterator[ClaimNotice]:
        return self.notices()

    def notices(self) -> Iterator[ClaimNotice]:
        """The notices as they arrive, blocking; see the class's documentation for when it ends."""
        while True:
            notice = self.next_notice(None)
            if notice is None:
                return
            yield notice

    def next_notice(self, timeout: Optional[float] = None) -> Optional[ClaimNotice]:
        """The next notice, waiting at most `timeout` seconds (``None``: as long as it takes); ``None`` on timeout or
        once the notices have ended.

        :raises ConnectionClosed: when accmond went away (:class:`~accmon.DaemonStopped` when it stopped).
        """
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, ClaimNotice):
            return item
        self._queue.put(item)  # every later call ends the same way
        if isinstance(item, AccmonError):
            raise item
        return None

    def wait_ended(self, timeout: Optional[float] = None) -> Optional[ClaimNotice]:
        """Waits until the claim ends; returns the notice that ended it (``None`` when it was released or closed
        here), without taking notices from the queue.

        :raises TimeoutError: when it still holds after `timeout` seconds.
        :raises ConnectionClosed: when accmond went away first.
        """
        if not self._finished.wait(timeout):
            raise TimeoutError(f"accmon: claim: {self.claim_id}: still held after {timeout} s")
        if self._state.ended is None and not self._state.released and self._connection_error is not None:
            raise self._connection_error
        return self._state.ended

    def wait_granted(self, timeout: Optional[float]) -> None:
        """For a claim that waits in line: returns once it is granted.

        :raises ClaimTimeout: not within `timeout` seconds; the place in line is given up.
        :raises ClaimCancelled: accmond cancelled it.
        :raises ConnectionClosed: accmond went away first.
        """
        claim_id = self.claim_id
        try:
            granted = self._settled.wait(timeout)
        except BaseException:  # KeyboardInterrupt: the place in line is given up
            self.release()
            raise
        if not granted:
            blockers = self._state.info.blockers
            self.release()
            holders = "; ".join(f"{summary.claim_id} of {summary.holder}" for summary in blockers) or "others"
            raise ClaimTimeout(f"accmon: claim: {claim_id}: not granted within {timeout} s: held by {holders}",
                               blockers)  # fmt: skip
        ended = self._state.ended
        if ended is not None:
            self._link.close()
            raise ClaimCancelled(f"accmon: claim: {claim_id}: cancelled: {ended.reason or 'it can never be served'}",
                                 ended.reason or "")  # fmt: skip
        if self._connection_error is not None:
            if self._state.waiting:
                raise ConnectionClosed(f"accmon: claim: {claim_id}: the connection ended while waiting (take the "
                                       "place up again with its token: client.claim(token=..., wait=True))",
                                       claim_token=self._state.info.token) from self._connection_error  # fmt: skip
            raise self._connection_error

    def release(self) -> None:
        """Releases the claim (its nodes are as they were, the next claimer in line gets its accessories) and closes
        its connection. Does nothing when it was released already; no error when it has ended meanwhile."""
        if self._state.released:
            return
        try:
            if self._state.ended is None and self._link.ended is None:
                self._state.released = True
                try:
                    self._link.request(release_request(self.claim_id), "ok")
                except ProtocolError as error:
                    if error.code != "no-such-claim":  # it ended meanwhile: its notice says how
                        raise
                except ConnectionClosed:
                    pass  # the claim ended with the connection
        finally:
            self._link.close()

    def close(self) -> None:
        """The same as :meth:`release`."""
        self.release()

    def __enter__(self) -> "BlockingClaim":
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        try:
            self.release()
        except AccmonError:
            if error is None:
                raise


def start_claim(
    link: ClaimLink,
    request: Dict[str, Any],
    timeout: Optional[float],
    on_notice: Optional[Callable[[ClaimNotice], None]],
    on_waiting: Optional[Callable[[ClaimInfo], None]],
    kind: Type[BlockingClaim] = BlockingClaim,
    until_granted: bool = True,
) -> BlockingClaim:
    """Sends `request` on `link` (which the claim, of class `kind`, then owns) and returns the claim once it holds
    (or, unless `until_granted`, once accmond answered, maybe with its place in line)."""
    try:
        reply = link.request(request, "claim")
        claim = kind(link, ClaimInfo.from_json(reply.get("claim"), "claim.claim"), on_notice)
    except BaseException:
        link.close()
        raise
    if claim._state.waiting and until_granted:
        if on_waiting is not None:
            on_waiting(claim.info)
        claim.wait_granted(timeout)
    return claim
