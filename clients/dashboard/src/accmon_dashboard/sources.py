"""Where the state comes from: ``accmon watch --broker URL --json`` (the fleet) or ``accmon watch --json`` (this
host), kept running: when the reader exits it is started again after a pause (0.5 s, doubling up to 10 s; back to
0.5 s once a run lasted 30 s). The broker's own outages are the reader's to ride out: it reconnects by itself and
prints the difference; its standard error says so, which the page shows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Callable, List, Optional

from .model import Model
from .process import read_lines, run_command, stop_task
from .records import Delta
from .settings import Settings

__all__ = ["Backoff", "FleetSource", "LocalSource"]

log = logging.getLogger("accmon-dashboard")
Publish = Callable[[Delta], None]


class Backoff:
    """The pause before a reader is started again."""

    def __init__(self, first: float = 0.5, limit: float = 10.0, reset_after: float = 30.0) -> None:
        self.first = first
        self.limit = limit
        self.reset_after = reset_after
        self.current = first

    def next(self, ran_for: float) -> float:
        if ran_for >= self.reset_after:
            self.current = self.first
        delay = self.current
        self.current = min(self.current * 2, self.limit)
        return delay


class _Source:
    """A reader kept running, with the model it feeds and the function that sends changes to the pages."""

    name = "accmon watch"

    def __init__(self, accmon: str, settings: Settings, model: Model, publish: Publish) -> None:
        self.accmon = accmon
        self.settings = settings
        self.model = model
        self.publish = publish
        #: How many times the reader was started (for /metrics).
        self.starts = 0
        self.backoff = Backoff()

    def command(self) -> List[str]:
        raise NotImplementedError

    async def before_run(self) -> None:
        """Called before each start of the reader."""

    def after_run(self, reason: str) -> None:
        """Called when the reader exited, with why."""

    def on_batch(self, lines: List[Any]) -> None:
        raise NotImplementedError

    def on_message(self, text: str) -> None:
        log.info("%s: %s", self.name, text)

    async def stop_side_tasks(self) -> None:
        """Stops what the source started beside its reader (after the task running ``run`` has ended)."""

    async def run(self) -> None:
        """Runs the reader again and again, until cancelled."""
        while True:
            await self.before_run()
            started = time.monotonic()
            self.starts += 1
            try:
                status, message = await read_lines(self.command(), self.on_batch, self.on_message)
                reason = message or f"{self.name} exited with status {status}"
            except (OSError, ValueError) as error:
                reason = f"{self.name}: {error}"
            self.after_run(reason)
            delay = self.backoff.next(time.monotonic() - started)
            log.warning("%s; starting it again in %g s", reason, delay)
            self.publish(self.model.set_source("down", f"{reason}; starting it again in {delay:g} s"))
            await asyncio.sleep(delay)


class FleetSource(_Source):
    """The fleet, through ``accmon watch --broker URL --json``."""

    name = "accmon watch --broker"

    def command(self) -> List[str]:
        return [self.accmon, "watch", "--json", *self.settings.broker_arguments()]

    def on_batch(self, lines: List[Any]) -> None:
        delta = self.model.apply_fleet(lines)
        if any(isinstance(line, dict) and line.get("type") == "fleet" for line in lines):
            delta.merge(self.model.set_source("connected"))
        self.publish(delta)

    def on_message(self, text: str) -> None:
        super().on_message(text)
        # The reader's diagnostics (FleetReader): "...; reconnecting in 0.4 s" and "accmon: connected to URL".
        if "reconnecting" in text:
            self.publish(self.model.set_source("reconnecting", text))
        elif "connected to" in text:
            self.publish(self.model.set_source("connected"))


class LocalSource(_Source):
    """This host, through ``accmon watch --json`` (and ``accmon history --json`` where it exists)."""

    def __init__(self, accmon: str, settings: Settings, model: Model, publish: Publish, host: str) -> None:
        super().__init__(accmon, settings, model, publish)
        self.host = host
        self.online_since: Optional[float] = None
        #: ``None`` until tried; ``False`` when this accmon has no ``history`` command.
        self.history_available: Optional[bool] = None
        self._history: Optional["asyncio.Task[None]"] = None

    def base(self) -> List[str]:
        socket = self.settings.get("socket")
        return [self.accmon, *(["--socket", socket] if socket is not None else [])]

    def command(self) -> List[str]:
        return [*self.base(), "watch", "--json"]

    async def before_run(self) -> None:
        # When accmond started: the host is online since then.
        status, output, _ = await run_command([*self.base(), "status", "--json"], timeout=10)
        self.online_since = None
        if status == 0:
            try:
                uptime = json.loads(output)["status"]["uptimeSeconds"]
                self.online_since = time.time() - float(uptime)
            except (ValueError, KeyError, TypeError):
                pass

    def on_batch(self, lines: List[Any]) -> None:
        delta = self.model.apply_local(self.host, lines, self.online_since)
        if any(isinstance(line, dict) and line.get("type") == "snapshot" for line in lines):
            delta.merge(self.model.set_source("connected"))
            if self.history_available is not False and (self._history is None or self._history.done()):
                self._history = asyncio.ensure_future(self.load_history())
        self.publish(delta)

    def after_run(self, reason: str) -> None:
        self.publish(self.model.local_offline(self.host, reason))

    async def stop_side_tasks(self) -> None:
        if self._history is not None:
            await stop_task(self._history)

    async def load_history(self) -> None:
        """Adds the host's recent history to the events (``accmon history --json --limit N``)."""
        command = [*self.base(), "history", "--json", "--limit", str(self.model.max_events)]
        status, output, errors = await run_command(command)
        if status == 64 and "unknown command" in errors:
            if self.history_available is None:
                log.info("this accmon has no history command: the events shown are those seen since the start")
            self.history_available = False
            return
        if status != 0:
            log.warning("accmon history: %s", errors.strip() or f"exit status {status}")
            return
        self.history_available = True
        entries: List[Any] = []
        for line in output.splitlines():
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    entries.append(None)
        self.publish(self.model.apply_history(self.host, entries))
