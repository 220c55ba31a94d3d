"""What ``python3 -m accmon`` prints: the same lines and tables as the Swift ``accmon`` command."""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any, List, Mapping, Optional, Sequence

from .model import Accessory, Snapshot, Status

__all__ = ["Style", "human_line", "json_line", "list_table", "quoted_if_needed", "status_text", "table"]

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


def human_line(label: str, accessory: Accessory, style: Style, rejection: Optional[str] = None) -> str:
    """One watch line: time, change, kind, vendor:product, name, serial, device node, connection id."""
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
    return "  ".join(fields) + "\n"


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
        if show_verdict:
            reason = snapshot.rejected.get(accessory.connection_id)
            row.append(f"rejected: {reason}" if reason is not None else "allowed")
        rows.append(row)
    header = ["CONN", "KIND", "ID", "NAME", "SERIAL", "NODES"] + (["MANIFEST"] if show_verdict else [])
    return table(header, rows)


def _state_label(client: Mapping[str, Any]) -> str:
    state = client.get("state")
    if state == "suspended":
        return f"suspended ({client.get('suspendedBecause', '')})"
    if state == "live" and not client.get("subscribed"):
        return "idle"
    return str(state)


def status_text(status: Status, socket_path: str) -> str:
    """``accmon status``'s text."""
    text = (
        f"accmond {status.daemon_version} on {socket_path} (protocol {status.protocol_version})\n"
        f"uptime:       {int(status.uptime_seconds)} s\n"
        f"accessories:  {status.connected_accessories} connected\n"
        f"sessions:     {status.sessions}\n"
        f"sequence:     {status.sequence}\n"
        f"simulation:   {'on' if status.simulate else 'off'}\n"
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
    return text + "\n" + table(["SESSION", "CLIENT", "PID", "UID", "STATE", "QUEUED", "UNSENT", "IDLE"], rows)
