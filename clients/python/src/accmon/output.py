"""What ``python3 -m accmon`` prints: the same lines and tables as the Swift ``accmon`` command."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .claim_model import ClaimList, ClaimSummary, ClaimUpdate, Party
from .model import Accessory, Snapshot, Status

__all__ = [
    "Style",
    "accessory_json",
    "claim_update_line",
    "claims_table",
    "holder_label",
    "human_line",
    "json_line",
    "list_table",
    "quoted_if_needed",
    "status_text",
    "table",
]

#: The version of the ``--json`` documents (``list``, ``status``, ``wait``), as the Swift command writes it.
JSON_OUTPUT_VERSION = 1


class Style:
    """Colour only on a terminal, and never with ``NO_COLOR`` set."""

    def __init__(self, colour: bool) -> None:
        self.colour = colour

    @classmethod
    def for_stdout(cls) -> "Style":
        return cls(sys.stdout.isatty() and not os.environ.get("NO_COLOR"))

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text


def json_line(value: Any) -> str:
    """Compact JSON with sorted keys, and a newline."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def quoted_if_needed(text: str) -> str:
    """Quotes text with spaces, quotes or control characters, so that each field stays one token."""
    if all(ord(character) > 0x20 and character != '"' and ord(character) != 0x7F for character in text):
        return text
    quoted = []
    for character in text:
        if character == '"':
            quoted.append('\\"')
        elif character == "\\":
            quoted.append("\\\\")
        elif ord(character) < 0x20 or ord(character) == 0x7F:
            quoted.append(f"\\u{{{ord(character):x}}}")
        else:
            quoted.append(character)
    return '"' + "".join(quoted) + '"'


def _timestamp() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def clock_time(seconds: float) -> str:
    """The local time of day of a wall-clock time, ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S", time.localtime(int(seconds)))


def user_label(party: Party) -> str:
    """A party in a column: its user name (this host's for the uid when accmond gave none), ``ci (remote)``."""
    return f"{party.user} (remote)" if party.remote else party.name


def holder_label(claim: ClaimSummary) -> str:
    """Who holds a claim, in a column: ``alice since 10:04:05``."""
    return f"{user_label(claim.holder)} since {clock_time(claim.since)}"


def accessory_json(accessory: Accessory, claim: Optional[ClaimSummary]) -> Dict[str, Any]:
    """The accessory's object, with its ``claim`` when claimed."""
    value = accessory.to_json()
    if claim is not None:
        value["claim"] = claim.to_json()
    return value


def human_line(
    label: str, accessory: Accessory, style: Style, rejection: Optional[str] = None, claim: Optional[ClaimSummary] = None
) -> str:
    """One watch line: time, change, kind, vendor:product, name, serial, device node, connection id; the claim's
    holder."""
    colour = {"connect": "32", "disconnect": "31"}.get(label, "2")
    fields = [
        _timestamp(),
        style.paint(label.ljust(10), colour),
        accessory.kind.ljust(13),
        accessory.usb_id,
        quoted_if_needed(accessory.name) if accessory.name else '""',
    ]
    if accessory.serial_number:
        fields.append(f"serial={quoted_if_needed(accessory.serial_number)}")
    if accessory.device_nodes:
        fields.append(accessory.device_nodes[0])
    fields.append(f"conn={accessory.connection_id}")
    if rejection is not None:
        fields.append(style.paint(f"rejected: {rejection}", "33"))
    if claim is not None:
        fields.append(style.paint(f"claimed by {holder_label(claim)}", "35"))
    return "  ".join(fields) + "\n"


def claim_update_line(update: ClaimUpdate, style: Style) -> str:
    """The watch line of a claim change: ``claimed`` by whom (why, how many wait), or ``released``."""
    claim = update.claim
    if claim is None:
        return f"{_timestamp()}  {style.paint('released'.ljust(10), '35')}  conn={update.connection_id}  " \
               f"{update.accessory_id}\n"  # fmt: skip
    line = f"{_timestamp()}  {style.paint('claimed'.ljust(10), '35')}  conn={update.connection_id}  " \
           f"{update.accessory_id}  by {holder_label(claim)}"  # fmt: skip
    if claim.reason:
        line += f": {quoted_if_needed(claim.reason)}"
    if claim.waiting > 0:
        line += f"  ({claim.waiting} waiting)"
    return line + "\n"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table with left-aligned columns separated by two spaces."""
    widths = [len(cell) for cell in header]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    lines = []
    for cells in [list(header)] + [list(row) for row in rows]:
        padded = [cell if index == len(cells) - 1 else cell.ljust(widths[index]) for index, cell in enumerate(cells)]
        lines.append("  ".join(padded) + "\n")
    return "".join(lines)


def list_table(snapshot: Snapshot, show_verdict: bool) -> str:
    """``accmon list``'s table."""
    rows: List[List[str]] = []
    for accessory in snapshot:
        row = [
            str(accessory.connection_id),
            accessory.kind,
            accessory.usb_id,
            quoted_if_needed(accessory.name),
            quoted_if_needed(accessory.serial_number),
            ",".join(accessory.device_nodes),
        ]
        claim = snapshot.claims.get(accessory.connection_id)
        row.append(holder_label(claim) if claim is not None else "-")
        if show_verdict:
            reason = snapshot.rejected.get(accessory.connection_id)
            row.append(f"rejected: {reason}" if reason is not None else "allowed")
        rows.append(row)
    header = ["CONN", "KIND", "ID", "NAME", "SERIAL", "NODES", "HOLDER"] + (["MANIFEST"] if show_verdict else [])
    return table(header, rows)


def _state_label(client: Mapping[str, Any]) -> str:
    state = client.get("state")
    if state == "suspended":
        return f"suspended ({client.get('suspendedBecause', '')})"
    if state == "live" and not client.get("subscribed"):
        return "idle"
    return str(state)


def _claims_line(status: Status) -> str:
    if status.claims is None:
        return "not supported by this accmond"
    return f"{status.claims} held, {status.claim_waiters or 0} waiting"


def status_text(status: Status, socket_path: str) -> str:
    """``accmon status``'s text."""
    text = (
        f"accmond {status.daemon_version} on {socket_path} (protocol {status.protocol_version})\n"
        f"uptime:       {int(status.uptime_seconds)} s\n"
        f"accessories:  {status.connected_accessories} connected\n"
        f"sessions:     {status.sessions}\n"
        f"sequence:     {status.sequence}\n"
        f"simulation:   {'on' if status.simulate else 'off'}\n"
        f"claims:       {_claims_line(status)}\n"
    )
    manifest = status.manifest
    if manifest:
        files = ", ".join(manifest.get("files") or []) or "no file"
        text += (
            f"manifest:     {manifest.get('entries', 0)} entries from {files}; "
            f"{manifest.get('rejectedAccessories', 0)} connected accessories rejected\n"
        )
        failures = manifest.get("lastFailure") or []
        if failures:
            text += "              the last load failed; the manifest above stays in force:\n"
            text += "".join(f"                {problem}\n" for problem in failures)
    rows = [
        [
            str(client.get("sessionID", "")),
            str(client.get("transport") or "socket"),
            quoted_if_needed(str(client.get("clientName") or "-")),
            "-" if not client.get("pid") else str(client.get("pid")),
            str(client.get("uid", "")),
            _state_label(client),
            str(client.get("queuedEvents", 0)),
            str(client.get("outboundBytes", 0)),
            f"{int(client.get('idleSeconds', 0))} s",
        ]
        for client in status.clients
    ]
    return text + "\n" + table(["SESSION", "VIA", "CLIENT", "PID", "UID", "STATE", "QUEUED", "UNSENT", "IDLE"], rows)


def claims_table(claims: ClaimList) -> str:
    """``accmon claims``' tables: the claims, then the claimers waiting in line."""
    if not claims.claims and not claims.waiters:
        return "no claims\n"
    text = table(
        ["CLAIM", "CONN", "ACCESSORY", "HOLDER", "UID", "PID", "SINCE", "WAITING", "REASON"],
        [
            [
                claim.claim_id,
                ",".join(map(str, claim.connections)) or "-",
                ",".join(claim.accessory_ids),
                user_label(claim.holder),
                "-" if claim.holder.uid is None else str(claim.holder.uid),
                "-" if claim.holder.pid is None else str(claim.holder.pid),
                clock_time(claim.since) + (" (away)" if claim.state == "returning" else ""),
                str(claim.waiting),
                quoted_if_needed(claim.reason),
            ]
            for claim in claims.claims
        ],
    )
    if claims.waiters:
        text += "\n" + table(
            ["WAITING", "PLACE", "CLAIMER", "UID", "PID", "SINCE", "WANTS", "REASON"],
            [
                [
                    waiter.claim_id,
                    str(waiter.position),
                    user_label(waiter.party),
                    "-" if waiter.party.uid is None else str(waiter.party.uid),
                    "-" if waiter.party.pid is None else str(waiter.party.pid),
                    clock_time(waiter.since),
                    ",".join(map(str, waiter.connections)) or f"{waiter.count} matching",
                    quoted_if_needed(waiter.reason),
                ]
                for waiter in claims.waiters
            ],
        )
    return text
