"""The pages that follow the state: each gets the whole state once, then every change, as server-sent events.

A change is encoded once and the same bytes are queued for every page. A page that falls :data:`MAX_QUEUED`
messages behind (a stalled browser, a dead network that TCP has not noticed yet) is dropped: its stream ends, its
browser connects again and gets the whole state, so memory stays bounded and nobody else waits.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, Callable, Deque, Dict, Optional, Set

from .records import Delta

__all__ = ["Follower", "Hub", "MAX_QUEUED", "encode_event"]

MAX_QUEUED = 2000
#: How long a browser waits before it connects again after the stream ended (the ``retry`` field), in ms.
RETRY_MS = 1000


def encode_event(kind: str, data: Dict[str, Any]) -> bytes:
    """One server-sent event. JSON never holds a raw line break, so the data is one ``data:`` line."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return f"event: {kind}\ndata: {text}\n\n".encode("utf-8")


class Follower:
    """One page's queue of encoded events."""

    def __init__(self) -> None:
        self.queue: Deque[Optional[bytes]] = deque()
        self.ready = asyncio.Event()
        self.dropped = False

    def put(self, data: Optional[bytes]) -> None:
        if self.dropped:
            return
        if data is not None and len(self.queue) >= MAX_QUEUED:
            self.dropped = True
            self.queue.clear()
            data = None
        self.queue.append(data)
        self.ready.set()

    async def get(self, timeout: float, idle: bytes) -> Optional[bytes]:
        """The next event; ``None`` when the stream must end; `idle` after `timeout` seconds without one."""
        if not self.queue:
            self.ready.clear()
            try:
                await asyncio.wait_for(self.ready.wait(), timeout)
            except asyncio.TimeoutError:
                return idle
        return self.queue.popleft()


class Hub:
    """The followers, and what they are sent."""

    def __init__(self, snapshot: Callable[[], Dict[str, Any]]) -> None:
        self.snapshot = snapshot
        self.followers: Set[Follower] = set()
        #: Changes sent, and followers dropped for falling behind (for /metrics).
        self.sent = 0
        self.dropped = 0

    def follow(self) -> Follower:
        """A new follower, its first event (the whole state) queued."""
        follower = Follower()
        follower.put(f"retry: {RETRY_MS}\n".encode() + encode_event("state", self.snapshot()))
        self.followers.add(follower)
        return follower

    def leave(self, follower: Follower) -> None:
        self.followers.discard(follower)
        if follower.dropped:
            self.dropped += 1

    def publish(self, delta: Delta) -> None:
        if not delta:
            return
        self.sent += 1
        if not self.followers:
            return
        data = encode_event("delta", delta.to_json())
        for follower in self.followers:
            follower.put(data)

    def close(self) -> None:
        """Ends every stream (shutdown)."""
        for follower in self.followers:
            follower.put(None)
