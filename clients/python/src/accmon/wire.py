"""The wire protocol's plumbing, shared by the asyncio and the blocking clients: where the socket is, how requests
are encoded, how the daemon's lines are framed and decoded, and which exception each failure becomes.

Nothing here does I/O except :func:`accmond_running`, which reads ``/proc``.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from .claim_conflicts import ClaimConflict
from .claim_summary import summaries
from .errors import AccmonError, DaemonUnreachable, PermissionDenied, ProtocolError
from .filters import IdLike, hex_id
from .model import KINDS

__all__ = [
    "DEFAULT_SOCKET",
    "SOCKET_ENVIRONMENT_VARIABLE",
    "SUPPORTED_VERSIONS",
    "LineBuffer",
    "accmond_running",
    "connect_error",
    "decode",
    "encode",
    "error_from_reply",
    "expect_reply",
    "hello_request",
    "resolve_socket",
    "simulated_accessory",
]

#: Where accmond listens unless told otherwise (docs/PROTOCOL.md §1).
DEFAULT_SOCKET = "/run/accmon/accmon.sock"
#: The environment variable that names the socket when no path is given.
SOCKET_ENVIRONMENT_VARIABLE = "ACCMON_SOCKET"
#: The protocol versions this package speaks.
SUPPORTED_VERSIONS = (1,)
#: The longest line accepted from the daemon: a snapshot of many accessories is one long line (~500 bytes each).
MAXIMUM_LINE = 64 << 20


def resolve_socket(explicit: Optional[str] = None) -> str:
    """The socket path a client uses: `explicit` when given and not empty, else ``$ACCMON_SOCKET`` when set and not
    empty, else ``/run/accmon/accmon.sock``, as the ``accmon`` command does."""
    if explicit:
        return os.fspath(explicit)
    return os.environ.get(SOCKET_ENVIRONMENT_VARIABLE) or DEFAULT_SOCKET


def encode(message: Dict[str, Any]) -> bytes:
    """One request line: compact JSON and a newline."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def hello_request(
    client_name: Optional[str], restore_id: Optional[str], relaunch: Optional[str] = None
) -> Dict[str, Any]:
    """The ``hello`` request (docs/PROTOCOL.md §4), without its ``id``."""
    request: Dict[str, Any] = {"type": "hello", "versions": list(SUPPORTED_VERSIONS)}
    if client_name is not None:
        request["client"] = client_name
    if restore_id is not None:
        request["restoreID"] = restore_id
    if relaunch is not None:
        request["relaunch"] = relaunch
    return request


class LineBuffer:
    """Splits the daemon's byte stream into lines (without their newlines); a line may span many reads."""

    def __init__(self, limit: int = MAXIMUM_LINE) -> None:
        self._pending: List[bytes] = []
        self._pending_size = 0
        self._limit = limit

    def feed(self, data: bytes) -> List[bytes]:
        """Adds `data`; returns the lines it completes, in order.

        :raises ProtocolError: ``invalid-response`` when a line grows past the limit.
        """
        if b"\n" not in data:
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size > self._limit:
                raise ProtocolError("invalid-response", f"accmon: reply: a line from accmond passed {self._limit} bytes")
            return []
        lines = data.split(b"\n")
        if self._pending:
            lines[0] = b"".join(self._pending) + lines[0]
            self._pending = []
            self._pending_size = 0
        tail = lines.pop()
        if tail:
            self._pending.append(tail)
            self._pending_size = len(tail)
        return lines


_raw_decode = json.JSONDecoder().raw_decode


def decode(line: bytes) -> Optional[Dict[str, Any]]:
    """Decodes one line from the daemon; ``None`` for a blank line.

    :raises ProtocolError: ``invalid-response`` when the line is not a JSON object with a string ``type``.
    """
    try:
        # The daemon's lines are compact: decoding the text and then its one value costs about half of json.loads on
        # the bytes, which also detects the encoding and allows surrounding whitespace.
        text = line.decode()
        message, end = _raw_decode(text)
        if end != len(text) and text[end:].strip():
            raise ValueError(f"extra data at character {end}")
    except ValueError as error:
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError:
            raise ProtocolError(
                "invalid-response", f"accmon: reply: accmond sent a line that is not JSON: {error}"
            ) from None
    if type(message) is not dict or type(message.get("type")) is not str:
        raise ProtocolError("invalid-response", "accmon: reply: accmond sent a line that is not a message object")
    return message


def error_from_reply(message: Dict[str, Any]) -> AccmonError:
    """The exception for an ``error`` reply: :class:`PermissionDenied` for ``permission-denied``,
    :class:`ClaimConflict` with the holders for ``claim-conflict``, else :class:`ProtocolError` with the reply's
    code."""
    code = message.get("code")
    text = message.get("message")
    code = code if isinstance(code, str) else "unknown"
    text = text if isinstance(text, str) else f"accmond refused the request ({code})"
    if code == "permission-denied":
        return PermissionDenied(text)
    if code == "claim-conflict":
        return ClaimConflict(text, summaries(message.get("holders"), "error.holders"))
    return ProtocolError(code, text)


def expect_reply(message: Dict[str, Any], expected: str, request: str) -> Dict[str, Any]:
    """Returns `message` when it is the `expected` reply to `request`.

    :raises AccmonError: the reply's error (:func:`error_from_reply`), or ``invalid-response`` for another type.
    """
    kind = message["type"]
    if kind == expected:
        return message
    if kind == "error":
        raise error_from_reply(message)
    raise ProtocolError("invalid-response", f"accmon: {request}: accmond replied '{kind}', expected '{expected}'")


def accmond_running() -> Optional[bool]:
    """Whether a process named ``accmond`` runs on this host, from ``/proc/*/comm``; ``None`` without ``/proc``."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm", "rb") as comm:
                    if comm.read().strip() == b"accmond":
                        return True
            except OSError:
                continue  # the process ended meanwhile, or hides its details
    return False


def connect_error(path: str, error: OSError) -> AccmonError:
    """The exception for a failed ``connect`` to `path`: :class:`PermissionDenied` when the socket's permissions
    refuse this user, else :class:`DaemonUnreachable`."""
    reason = error.strerror or str(error)
    if error.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(
            f"accmon: cannot connect to '{path}': {reason}; is this user in the 'accmon' group? "
            "(the socket's permissions decide who may connect)"
        )
    return DaemonUnreachable(path, reason, accmond_running())


def simulated_accessory(
    kind: str,
    *,
    vendor: IdLike = None,
    product: IdLike = None,
    name: str = "",
    manufacturer: str = "",
    model: str = "",
    serial: str = "",
    firmware: str = "",
    hardware: str = "",
    protocols: Sequence[str] = (),
    nodes: Sequence[str] = (),
    sysfs: str = "",
    port: str = "",
    interface: str = "",
    accessory_id: Optional[str] = None,
) -> Dict[str, Any]:
    """The accessory object of a ``simulate`` ``connect`` request (docs/PROTOCOL.md §7.7), from the options of
    ``accmon simulate connect``. The daemon derives ``accessoryID`` when it is not given.

    :raises ValueError: for an unknown kind or an id that is not hex.
    """
    if kind not in KINDS:
        raise ValueError(f"simulate: kind: '{kind}' is not a kind ({', '.join(KINDS)})")
    if isinstance(protocols, str) or isinstance(nodes, str):
        raise ValueError("simulate: protocols and nodes are lists of strings, not a string")
    accessory: Dict[str, Any] = {
        "kind": kind,
        "vendorID": hex_id("simulate: vendor", vendor) or "",
        "productID": hex_id("simulate: product", product) or "",
        "name": name,
        "manufacturer": manufacturer,
        "modelNumber": model,
        "serialNumber": serial,
        "firmwareRevision": firmware,
        "hardwareRevision": hardware,
        "protocolStrings": list(protocols),
        "deviceNodes": list(nodes),
        "sysfsPath": sysfs,
        "portPath": port,
        "interfaceNumber": interface,
    }
    if accessory_id is not None:
        accessory["accessoryID"] = accessory_id
    return accessory
