"""The queue between a :class:`~accmon.Session`'s link and the app: bounded by pausing the link, not by dropping."""

from __future__ import annotations

import asyncio
import collections
from typing import Deque, Optional, Union

from .link import END, PAUSE_AT, RESUME_BELOW, _End
from .model import AccessoryEvent

__all__ = ["OutputQueue"]


class OutputQueue:
    """The events a :class:`~accmon.Session` has handed to the app, waiting to be consumed; ends with END, or with an
    error raised to the consumer."""

    def __init__(self) -> None:
        self._items: Deque[Union[AccessoryEvent, _End]] = collections.deque()
        self._event = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._error: Optional[BaseException] = None

    def put(self, item: Union[AccessoryEvent, _End]) -> None:
        self._items.append(item)
        self._event.set()
        if len(self._items) >= PAUSE_AT:
            self._room.clear()

    async def room(self) -> None:
        """Returns once fewer than PAUSE_AT events wait: while the app lags that far behind, the session takes no
        more from its connection, which then stops reading, so that accmond holds (and coalesces) the rest."""
        await self._room.wait()

    def fail(self, error: BaseException) -> None:
        """Ends the output with `error`, raised to the consumer after the events already handed."""
        self._error = error
        self.put(END)

    async def get(self) -> Union[AccessoryEvent, _End]:
        while not self._items:
            self._event.clear()
            await self._event.wait()
        item = self._items[0]
        if item is not END:
            self._items.popleft()
            if len(self._items) < RESUME_BELOW:
                self._room.set()
        elif self._error is not None:
            raise self._error
        return item
