"""The exceptions the accmon client raises.

Every exception is an :class:`AccmonError` with a stable :attr:`~AccmonError.code` for programs and a message of the
form ``context: object: reason`` for people. The daemon's own error replies keep the protocol's code
(docs/PROTOCOL.md §9): :class:`ProtocolError` for most, :class:`PermissionDenied` for ``permission-denied``.
The errors that name the claims in a claim's way, :class:`~accmon.ClaimConflict` and :class:`~accmon.ClaimTimeout`,
are in claim_conflicts.py: they need the claim values, which this module is below (their decoding raises
:class:`ProtocolError`).
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "AccmonError",
    "DaemonUnreachable",
    "PermissionDenied",
    "ProtocolError",
    "ConnectionClosed",
    "DaemonStopped",
    "WaitTimeout",
    "ClaimCancelled",
    "PROTOCOL_ERROR_CODES",
]

#: The error codes of protocol version 1 (docs/PROTOCOL.md §9). The daemon may add codes: treat an unknown one as a
#: generic failure.
PROTOCOL_ERROR_CODES = frozenset(
    {
        "malformed-json",
        "invalid-message",
        "unknown-type",
        "missing-field",
        "invalid-field",
        "line-too-long",
        "unsupported-version",
        "already-greeted",
        "restore-id-in-use",
        "already-subscribed",
        "not-subscribed",
        "permission-denied",
        "manifest-invalid",
        "simulation-disabled",
        "no-such-connection",
        "too-many-connections",
        "claim-conflict",
        "no-match",
        "no-such-claim",
        "enforcement-failed",
    }
)


class AccmonError(Exception):
    """Base class of every error of this package.

    :ivar code: what kind of failure this is, stable for programs (a protocol error code, or one of this package's:
        ``daemon-unreachable``, ``connection-closed``, ``daemon-stopped``, ``timeout``, ``invalid-response``).
    :ivar message: what happened and, when the cause is known, what to do about it.
    """

    code: str = "accmon-error"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class DaemonUnreachable(AccmonError, ConnectionError):
    """Nothing answers on the socket: accmond is not running, or listens somewhere else.

    :ivar socket: the socket path that was tried.
    :ivar daemon_running: whether a process named ``accmond`` runs on this host (``None`` when that could not be
        told, for example without ``/proc``).
    :ivar reason: the operating system's reason, such as ``No such file or directory``.
    """

    code = "daemon-unreachable"

    def __init__(self, socket: str, reason: str, daemon_running: Optional[bool]) -> None:
        if daemon_running is None:
            hint = "is accmond running? (`systemctl status accmond`, or set ACCMON_SOCKET)"
        elif daemon_running:
            hint = "accmond is running, but not on this socket: give its --socket path, or set ACCMON_SOCKET"
        else:
            hint = "accmond is not running: start it (`systemctl start accmond.socket`), or set ACCMON_SOCKET"
        super().__init__(f"accmon: cannot connect to '{socket}': {reason}; {hint}")
        self.socket = socket
        self.reason = reason
        self.daemon_running = daemon_running


class PermissionDenied(AccmonError, PermissionError):
    """This user may not do that: the socket's permissions refuse the connection, or the daemon refused an admin
    operation (protocol code ``permission-denied``: ``simulate``, ``all=True``, ``reload``)."""

    code = "permission-denied"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ProtocolError(AccmonError):
    """The daemon refused a request, with one of the protocol's error codes (docs/PROTOCOL.md §9), or sent something
    this package cannot read (code ``invalid-response``).

    :ivar code: the protocol's code, such as ``invalid-field`` or ``no-such-connection``.
    :ivar message: the daemon's message (its wording is not stable).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code)

    def __repr__(self) -> str:
        return f"ProtocolError({self.code!r}, {self.message!r})"


class ConnectionClosed(AccmonError, ConnectionError):
    """The connection to accmond ended: the daemon went away, or the connection was closed.

    :ivar claim_token: when a claim was waiting in line (a restart of accmond cut the wait): the token that takes its
        place up again on a new connection, ``conn.claim(token=..., wait=True)``, as a holder takes up its claim;
        accmond keeps the place for its reclaim window (30 s by default). ``None`` otherwise.
    """

    code = "connection-closed"

    def __init__(self, message: str, claim_token: Optional[str] = None) -> None:
        super().__init__(message)
        self.claim_token = claim_token


class DaemonStopped(ConnectionClosed):
    """accmond announced that it is stopping (its ``shutdown`` message), then closed the connection.

    :ivar reason: the reason the daemon gave.
    """

    code = "daemon-stopped"

    def __init__(self, reason: str) -> None:
        super().__init__(f"accmon: accmond stopped: {reason}")
        self.reason = reason


class WaitTimeout(AccmonError, TimeoutError):
    """No matching accessory connected within the time given (``wait_for``); also a :class:`TimeoutError`."""

    code = "timeout"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ClaimCancelled(AccmonError):
    """accmond cancelled a claim waiting in line: it can never be served (what it waits for is gone, or may no longer
    be claimed, or could not be enforced). Code ``claim-cancelled``.

    :ivar reason: accmond's reason.
    """

    code = "claim-cancelled"

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason
