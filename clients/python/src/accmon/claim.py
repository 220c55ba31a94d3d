"""Check-out with asyncio: :class:`Claim`, what ``Connection.claim`` gives.

.. code-block:: python

    async with accmon.connect() as conn:
        async with conn.claim(kind="serial", vendor="0403", wait=True, reason="flashing") as claim:
            flash(claim.device_node)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Callable, Coroutine, Dict, Generator, Optional, Type

from .claim_conflicts import ClaimTimeout
from .claim_model import ClaimInfo, ClaimNotice
from .claim_requests import release_request
from .claim_state import ClaimView
from .errors import AccmonError, ClaimCancelled, ConnectionClosed, ProtocolError
from .link import END, ClaimChannel, Link
from .wire import expect_reply

__all__ = ["Claim", "Claiming"]


class Claim(ClaimView):
    """Accessories checked out for exclusive use through a connection: while the claim holds, nobody else may claim
    them, and their device nodes open for its user and root only (where accmond enforces it: :attr:`nodes`).

    It lives until :meth:`release`, the end of ``async with``, the end of its connection, or accmond ends it (broken by
    an admin, lost, expired: :attr:`ended`). Iterate it (``async for notice in claim``) for its notices
    (:class:`~accmon.ClaimNotice`): contention (who asked, and why), a break, its accessory going and coming back.
    The iteration ends after the notice that ends the claim or after :meth:`release`, and raises
    :class:`~accmon.ConnectionClosed` when the connection ends first (after a restart of accmond the claim waits for
    its holder: take it up with ``conn.claim(token=claim.token)`` on a new connection).
    """

    def __init__(self, link: Link, channel: ClaimChannel) -> None:
        self._link = link
        self._channel = channel
        self._state = channel.state

    @property
    def active(self) -> bool:
        """Whether the claim holds (or waits) still: not released, not ended, its connection open."""
        return not self._state.released and self._state.ended is None and self._link.ended is None

    def __aiter__(self) -> "Claim":
        return self

    async def __anext__(self) -> ClaimNotice:
        item = await self._channel.notices.get()
        if item is END:
            raise StopAsyncIteration
        assert isinstance(item, ClaimNotice)
        return item

    def notices(self) -> "Claim":
        """The notices, as an asynchronous iterator (the same as iterating the claim)."""
        return self

    async def next_notice(self, timeout: Optional[float] = None) -> Optional[ClaimNotice]:
        """The next notice; ``None`` when none came within `timeout` seconds, or the notices ended."""
        try:
            return await asyncio.wait_for(self.__anext__(), timeout)
        except (asyncio.TimeoutError, StopAsyncIteration):
            return None

    async def wait_ended(self, timeout: Optional[float] = None) -> Optional[ClaimNotice]:
        """Waits until the claim ends; returns the notice that ended it (``None`` when it was released or its
        connection closed by this side), without taking notices from the iteration.

        :raises asyncio.TimeoutError: when it still holds after `timeout` seconds.
        :raises ConnectionClosed: when the connection ended first.
        """
        await asyncio.wait_for(asyncio.shield(self._channel.finished), timeout)
        gone = self._link.ended
        if self._state.ended is None and not self._state.released and gone is not None and not self._link.closed_here:
            raise gone
        return self._state.ended

    async def release(self) -> None:
        """Releases the claim: its nodes are as they were, and the next claimer in line gets its accessories. Does
        nothing when it was released already, has ended, or its connection is closed."""
        if self._state.released or self._state.ended is not None or self._link.ended is not None:
            self._link.forget_claim(self.claim_id)
            return
        self._state.released = True
        try:
            expect_reply(await self._link.request(release_request(self.claim_id)), "ok", "release")
        except ProtocolError as error:
            if error.code != "no-such-claim":  # it ended meanwhile: its notice says how
                raise
        except ConnectionClosed:
            pass  # the claim ended with the connection
        finally:
            self._link.forget_claim(self.claim_id)

    async def __aenter__(self) -> "Claim":
        return self

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        await self.release()


async def make_claim(
    link: Link, request: Dict[str, Any], timeout: Optional[float], on_waiting: Optional[Callable[[ClaimInfo], None]]
) -> Claim:
    """Sends `request` and returns the claim once it holds, waiting in line when it asked to."""
    # Cancelled before the reply came, the claim may be in line already: it is given up when its reply names it.
    sent = asyncio.ensure_future(link.request(request))
    try:
        message = await asyncio.shield(sent)
    except asyncio.CancelledError:
        sent.add_done_callback(lambda done: _give_up(link, done))
        raise
    reply = expect_reply(message, "claim", "claim")
    claim_id = reply["claim"]["claimID"]
    channel = link.claims[claim_id]
    claim = Claim(link, channel)
    if not channel.state.waiting:
        return claim
    if on_waiting is not None:
        on_waiting(channel.state.info)
    try:
        await asyncio.wait_for(asyncio.shield(channel.settled), timeout)
    except asyncio.TimeoutError:
        await claim.release()  # gives up the place in line (or a grant that came just now)
        blockers = channel.state.info.blockers
        holders = "; ".join(f"{summary.claim_id} of {summary.holder}" for summary in blockers) or "others"
        raise ClaimTimeout(f"accmon: claim: {claim_id}: not granted within {timeout} s: held by {holders}",
                           blockers) from None  # fmt: skip
    except asyncio.CancelledError:
        if link.ended is None:
            link.send(dict(release_request(claim_id), id=0))  # the reply (id 0) is not waited for
        link.forget_claim(claim_id)
        raise
    ended = channel.state.ended
    if ended is not None:
        link.forget_claim(claim_id)
        raise ClaimCancelled(f"accmon: claim: {claim_id}: cancelled: {ended.reason or 'it can never be served'}",
                             ended.reason or "")  # fmt: skip
    if link.ended is not None:
        if channel.state.waiting:
            raise ConnectionClosed(f"accmon: claim: {claim_id}: the connection ended while waiting (take the place "
                                   "up again with its token: conn.claim(token=..., wait=True))",
                                   claim_token=channel.state.info.token) from link.ended  # fmt: skip
        raise link.ended
    return claim


def _give_up(link: Link, done: "asyncio.Future[Dict[str, Any]]") -> None:
    """Releases the claim a cancelled request's late reply names (a place in line, or a grant)."""
    if done.cancelled() or done.exception() is not None:
        return
    reply = done.result()
    claim_id = reply.get("claim", {}).get("claimID") if reply.get("type") == "claim" else None
    if isinstance(claim_id, str):
        if link.ended is None:
            link.send(dict(release_request(claim_id), id=0))  # the reply (id 0) is not waited for
        link.forget_claim(claim_id)


class Claiming:
    """What ``Connection.claim`` returns: await it for a :class:`Claim`, or use it with ``async with`` (the claim is
    released at the end of the block)."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, Claim]]) -> None:
        self._start = start
        self._claim: Optional[Claim] = None

    def __await__(self) -> Generator[Any, None, Claim]:
        return self._start().__await__()

    async def __aenter__(self) -> Claim:
        self._claim = await self._start()
        return self._claim

    async def __aexit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        if self._claim is not None:
            try:
                await self._claim.release()
            except AccmonError:
                if error is None:
                    raise
