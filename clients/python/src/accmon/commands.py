"""What each ``python3 -m accmon`` command does once its command line is parsed (see :mod:`accmon.cli`)."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any, Dict, List

from .claim_model import ClaimUpdate, Party
from .client import Client
from .command_line import Options
from .connection import connect
from .errors import ProtocolError
from .model import AccessoryEvent, Snapshot
from .output import JSON_OUTPUT_VERSION, Style, accessory_json, claim_update_line, claims_table, human_line, json_line
from .output import list_table, status_text
from .session import ConnectionState, Session

__all__ = ["run_claims", "run_list", "run_release", "run_status", "run_wait", "run_watch"]


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run_list(client: Client, options: Options) -> int:
    with client:
        snapshot = client.list(**_filter(options), all=options.all, claims=True)
    if options.json:
        document: Dict[str, Any] = {
            "version": JSON_OUTPUT_VERSION,
            "seq": snapshot.seq,
            "accessories": [accessory_json(item, snapshot.claims.get(item.connection_id)) for item in snapshot],
        }
        if options.all:
            document["rejected"] = {str(key): reason for key, reason in snapshot.rejected.items()}
        _write(json_line(document))
    else:
        _write(list_table(snapshot, options.all))
    return 0


def run_status(client: Client, options: Options) -> int:
    with client:
        status = client.status()
    if options.json:
        fields = {key: value for key, value in status.raw.items() if key not in ("type", "id")}
        _write(json_line({"version": JSON_OUTPUT_VERSION, "socket": client.socket_path, "status": fields}))
    else:
        _write(status_text(status, client.socket_path))
    return 0


def _named(party: Party) -> Party:
    """The party with this host's name for its uid when accmond gave none."""
    if party.remote or party.user or party.uid is None or party.name.startswith("uid "):
        return party
    return dataclasses.replace(party, user=party.name)


def run_claims(client: Client, options: Options) -> int:
    with client:
        claims = client.claims()
    claims = dataclasses.replace(
        claims, claims=tuple(dataclasses.replace(claim, holder=_named(claim.holder)) for claim in claims.claims)
    )
    if options.json:
        _write(json_line({
            "version": JSON_OUTPUT_VERSION,
            "claims": [claim.to_json() for claim in claims.claims],
            "waiters": [waiter.to_json() for waiter in claims.waiters],
        }))  # fmt: skip
    else:
        _write(claims_table(claims))
    return 0


def run_release(client: Client, options: Options) -> int:
    with client:
        try:
            client.release(options.target, force="--force" in options.flags, reason=options.values.get("--reason", ""))
        except ProtocolError as error:
            if error.code != "no-such-claim":
                raise
            sys.stderr.write(f"accmon: {error.message} ({error.code})\n")  # as the Swift accmon words it
            return 1
    return 0


def run_wait(client: Client, options: Options) -> int:
    with client:
        accessory = client.wait_for(
            **_filter(options), serial=options.values.get("--serial"), timeout=options.timeout
        )
    if options.json:
        _write(json_line({"version": JSON_OUTPUT_VERSION, "accessory": accessory.to_json()}))
    elif accessory.device_node is not None:
        _write(accessory.device_node + "\n")
    return 0


def _filter(options: Options) -> Dict[str, Any]:
    return {
        "kind": options.filter.kind,
        "vendor": options.filter.vendor,
        "product": options.filter.product,
        "protocol": options.filter.protocol,
    }


class _Printer:
    """Writes watch lines; flushes when no further event is waiting, so that a burst costs few writes."""

    def __init__(self, json: bool) -> None:
        self.json = json
        self.style = Style.for_stdout()
        self._pending: List[str] = []

    def snapshot(self, snapshot: Snapshot, label: str = "present") -> None:
        if self.json:
            document: Dict[str, Any] = {
                "type": "snapshot",
                "seq": snapshot.seq,
                "accessories": [accessory_json(item, snapshot.claims.get(item.connection_id)) for item in snapshot],
            }
            if snapshot.rejected:
                document["rejected"] = {str(key): reason for key, reason in snapshot.rejected.items()}
            self._pending.append(json_line(document))
        else:
            for accessory in snapshot:
                connection = accessory.connection_id
                self._pending.append(human_line(label, accessory, self.style, snapshot.rejected.get(connection),
                                                snapshot.claims.get(connection)))  # fmt: skip

    def event(self, event: AccessoryEvent) -> None:
        if self.json:  # to_json's keys are sorted already
            self._pending.append(json.dumps(event.to_json(), separators=(",", ":"), ensure_ascii=False) + "\n")
        else:
            self._pending.append(human_line(event.change, event.accessory, self.style, event.rejection))

    def claim_update(self, update: ClaimUpdate) -> None:
        if self.json:
            self._pending.append(json_line(update.to_json()))
        else:
            self._pending.append(claim_update_line(update, self.style))

    def flush(self) -> None:
        if self._pending:
            sys.stdout.write("".join(self._pending))
            self._pending.clear()
        sys.stdout.flush()


async def run_watch(options: Options) -> int:
    printer = _Printer(options.json)
    restore_id = options.values.get("--restore-id")
    if restore_id is not None:
        return await _watch_session(options, restore_id, printer)
    async with connect(options.socket, "python3 -m accmon") as connection:
        subscription = await connection.subscribe(**_filter(options), all=options.all, claims=True)
        printer.snapshot(subscription.snapshot)
        printer.flush()
        waiting = subscription._pushes
        try:
            async for change in subscription.changes():
                if isinstance(change, ClaimUpdate):
                    printer.claim_update(change)
                else:
                    printer.event(change)
                if not len(waiting):
                    printer.flush()
        finally:
            printer.flush()  # what was received before Ctrl-C or the daemon's end
    return 0


def _report_state(state: ConnectionState) -> None:
    if state.state == "connected":
        sys.stderr.write("accmon: connected to accmond\n")
    elif state.state == "reconnecting":
        sys.stderr.write(f"{state.reason}; reconnecting (attempt {state.attempt}, in {state.delay:g} s)\n")
    sys.stderr.flush()


async def _watch_session(options: Options, restore_id: str, printer: _Printer) -> int:
    """Watches through a :class:`Session`: survives restarts of both sides; printing an event consumes it."""
    session = Session(
        restore_id, "python3 -m accmon watch", options.socket, **_filter(options), on_state=_report_state
    )
    async with session:
        if options.json:
            document = {
                "type": "session",
                "restored": session.restored,
                "accessories": [accessory.to_json() for accessory in session.accessories],
            }
            _write(json_line(document))
        else:
            if session.restored:
                sys.stderr.write(f"accmon: session '{restore_id}' restored\n")
            printer.snapshot(Snapshot(session.accessories), "known" if session.restored else "present")
            printer.flush()
        async for event in session.events():
            printer.event(event)
            printer.flush()  # printed is consumed: the next request for an event acknowledges it
    return 0


