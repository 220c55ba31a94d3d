"""accmon: the Python client of accmond, the accessory event broker.

accmond tells its clients when external accessories (USB devices, USB serial ports, Bluetooth HID devices)
connect and disconnect. This package speaks its protocol (docs/PROTOCOL.md) with no dependency beyond the standard
library:

- :func:`connect` (asyncio): ``subscribe`` (a snapshot, then ``async for event in sub``), ``list``, ``status``,
  ``suspend`` and ``resume``; ``claim`` (check-out: ``async with conn.claim(kind="serial") as claim:``), ``claims``
  and ``release``;
- :class:`Session` (asyncio): a subscription kept by the daemon under a restore id across restarts of the app and of
  the daemon, acknowledged as the app consumes it, reconnecting by itself;
- :class:`Client` (blocking): ``list``, ``events``, ``wait_for``, and ``claim`` (``with client.claim(...) as
  claim:``), ``claims`` and ``release``;
- ``python3 -m accmon watch|list|wait|status``, the command line;
- :mod:`accmon.testing`, a pytest plugin that runs a simulated accmond and plugs accessories into it.
"""

from .blocking_claim import BlockingClaim
from .claim import Claim
from .claim_conflicts import ClaimConflict, ClaimTimeout
from .claim_model import (
    NOTICE_KINDS,
    ClaimedNode,
    ClaimInfo,
    ClaimList,
    ClaimNotice,
    ClaimSummary,
    ClaimUpdate,
    ClaimWaiter,
    NodeOpener,
    Party,
)
from .client import BlockingSubscription, Client
from .connection import Connection, Subscription, connect
from .errors import (
    PROTOCOL_ERROR_CODES,
    AccmonError,
    ClaimCancelled,
    ConnectionClosed,
    DaemonStopped,
    DaemonUnreachable,
    PermissionDenied,
    ProtocolError,
    WaitTimeout,
)
from .filters import Filter
from .model import KINDS, Accessory, AccessoryEvent, Snapshot, Status
from .session import ConnectionState, Session
from .wire import DEFAULT_SOCKET, resolve_socket

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SOCKET",
    "KINDS",
    "NOTICE_KINDS",
    "PROTOCOL_ERROR_CODES",
    "Accessory",
    "AccessoryEvent",
    "AccmonError",
    "BlockingClaim",
    "BlockingSubscription",
    "Claim",
    "ClaimCancelled",
    "ClaimConflict",
    "ClaimInfo",
    "ClaimList",
    "ClaimNotice",
    "ClaimSummary",
    "ClaimTimeout",
    "ClaimUpdate",
    "ClaimWaiter",
    "ClaimedNode",
    "Client",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "DaemonStopped",
    "DaemonUnreachable",
    "Filter",
    "NodeOpener",
    "Party",
    "PermissionDenied",
    "ProtocolError",
    "Session",
    "Snapshot",
    "Status",
    "Subscription",
    "WaitTimeout",
    "connect",
    "resolve_socket",
]
