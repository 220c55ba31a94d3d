"""Claims made by someone else, for an app's tests: :class:`TakenClaim`, what ``SimulatedDaemon.take`` gives.

The claim is made through a small process of its own, run as the user the test names (``as_user``: a real other
user, so that accmond sees that user's uid by the socket's credentials and names it to the app), which passes the
bytes between accmond and this process. Its connection is then this process's to use as a
:class:`~accmon.BlockingClaim`; killing that process (:meth:`TakenClaim.kill`) is the holder dying.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket as socket_module
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Union

from .blocking_claim import BlockingClaim, ClaimLink, start_claim
from .claim_model import ClaimList, ClaimSummary
from .claim_requests import ClaimTarget, ReleaseTarget, claim_request
from .filters import IdLike

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Account", "ClaimHelpers", "TakenClaim", "account", "take_claim"]

# The process that connects as the other user: stdlib only (run with -I, so that it needs nothing of this package and
# no file the other user could not read), it connects, says "ok" (or why not) on standard output, and then passes
# bytes both ways between accmond and its standard input (one end of a socket pair) until either side closes.
_RELAY = r"""
import os, select, socket, sys
daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    daemon.connect(sys.argv[1])
except OSError as error:
    os.write(1, ("cannot connect to '%s': %s\n" % (sys.argv[1], error.strerror)).encode())
    sys.exit(69)
os.write(1, b"ok\n")
ends = {0: daemon.fileno(), daemon.fileno(): 0}
while True:
    for ready in select.select(list(ends), [], [])[0]:
        data = os.read(ready, 65536)
        if not data:
            sys.exit(0)
        view = memoryview(data)
        while view:
            view = view[os.write(ends[ready], view):]
"""


class Account(NamedTuple):
    """A local user: name, uid, primary gid, and every group."""

    name: str
    uid: int
    gid: int
    groups: List[int]


def account(user: Union[str, int]) -> Account:
    """The local user named `user` (a name or a uid).

    :raises KeyError: when there is no such user.
    """
    entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, os.getgrouplist(entry.pw_name, entry.pw_gid))


class TakenClaim(BlockingClaim):
    """A claim made by another party for a test (see the module's documentation): a :class:`~accmon.BlockingClaim`,
    with :attr:`user` and the relay process; :meth:`release` also ends the relay."""

    process: "subprocess.Popen[bytes]"
    #: The user who claims.
    user: Account

    def __enter__(self) -> "TakenClaim":
        return self

    def kill(self) -> None:
        """Kills the claiming process with SIGKILL: to accmond, the holder (or waiter) died; its claim ends."""
        self._link.closing()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._link.close()

    def release(self) -> None:
        try:
            super().release()
        finally:
            if self.process.poll() is None:
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()


def _runs_for(user: Account, path: str) -> bool:
    """Whether `user` may execute `path`: every directory on the way searchable, the file executable, by the mode
    bits that apply to the user (owner, group, others)."""

    def allows(status: os.stat_result) -> bool:
        if status.st_uid == user.uid:
            return bool(status.st_mode & 0o100)
        if status.st_gid in user.groups or status.st_gid == user.gid:
            return bool(status.st_mode & 0o010)
        return bool(status.st_mode & 0o001)

    try:
        real = os.path.realpath(path)
        directory = os.path.dirname(real)
        while True:
            if not allows(os.stat(directory)):
                return False
            if directory == "/":
                break
            directory = os.path.dirname(directory)
        return allows(os.stat(real))
    except OSError:
        return False


def _interpreter(user: Optional[Account]) -> str:
    """A Python the claiming user may run (it needs nothing but its standard library): this one, its base
    interpreter, or the system's (a virtual environment or pyenv under a private home is not for other users)."""
    candidates = [sys.executable, getattr(sys, "_base_executable", None) or sys.executable, "/usr/bin/python3"]
    if user is None:
        return sys.executable
    for candidate in candidates:
        if _runs_for(user, candidate):
            return os.path.realpath(candidate)
    raise PermissionError(f"accmon.testing: take: as_user: '{user.name}' may run none of {', '.join(candidates)}")


def take_claim(
    socket_path: str,
    request: Dict[str, Any],
    user: Optional[Account],
    *,
    timeout: Optional[float],
    client_name: str = "accmon.testing",
) -> TakenClaim:
    """Claims with `request` as `user` (``None``: this process's user, from another process); returns once accmond
    answered: held, or waiting in line when `request` asked to wait.

    :raises PermissionError: when `user` is another user and this process may not switch to it (not root).
    :raises ClaimConflict: and the other errors of ``Client.claim``.
    """
    switch = user if user is not None and user.uid != os.geteuid() else None
    if switch is not None and os.geteuid() != 0:
        raise PermissionError(f"accmon.testing: take: as_user: claiming as '{switch.name}' (uid {switch.uid}) needs "
                              f"root; this test runs as uid {os.geteuid()}")  # fmt: skip
    ours, theirs = socket_module.socketpair(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
    try:
        process = subprocess.Popen(
            [_interpreter(switch), "-I", "-c", _RELAY, socket_path], stdin=theirs.fileno(), stdout=subprocess.PIPE, cwd="/",
            user=None if switch is None else switch.uid, group=None if switch is None else switch.gid,
            extra_groups=None if switch is None else switch.groups,
        )  # fmt: skip
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    assert process.stdout is not None
    status = process.stdout.readline().decode(errors="replace").strip()
    process.stdout.close()
    if status != "ok":
        ours.close()
        process.wait(10)
        raise ConnectionError(f"accmon.testing: take: {status or 'the claiming process ended'}")
    try:
        link = ClaimLink(socket_path, client_name, timeout, connected=ours)
    except BaseException:
        process.kill()
        process.wait()
        raise
    try:
        claim = start_claim(link, request, None, None, None, TakenClaim, until_granted=False)
    except BaseException:
        process.wait(10)
        raise
    assert isinstance(claim, TakenClaim)
    claim.process = process
    claim.user = user if user is not None else account(os.geteuid())
    return claim


class ClaimHelpers:
    """The claim helpers of :class:`~accmon.simulator.SimulatedDaemon`: someone else takes the app's accessory, an
    admin breaks the app's claim, and what accmond's claims are now."""

    socket: str
    #: The claims :meth:`take` made that may still run (set empty by the class that mixes this in).
    _taken: List[TakenClaim]

    def client(self) -> "Client":
        raise NotImplementedError

    def allow(self, user: Union[str, int]) -> Account:
        raise NotImplementedError

    def take(
        self,
        *connections: Union[ClaimTarget, Sequence[ClaimTarget]],
        as_user: Union[str, int, None] = None,
        kind: Optional[str] = None,
        vendor: IdLike = None,
        product: IdLike = None,
        protocol: Optional[str] = None,
        serial: Optional[str] = None,
        count: Optional[int] = None,
        wait: bool = False,
        reason: str = "",
        max_seconds: Optional[float] = None,
        timeout: Optional[float] = 10.0,
    ) -> TakenClaim:
        """Someone else claims accessories (by connection, accessory or filter, as ``Client.claim``): `as_user` (a
        user name or uid: a real other user, which needs root; it is given access to the accessories and the socket
        with :meth:`allow`), or by default this user from another process. With `wait`, it waits in line when they
        are held: the holder (the app) is told of the contention, and the claim is granted when the app releases
        (:meth:`TakenClaim.wait_granted`). Without `wait`, a held accessory raises :class:`~accmon.ClaimConflict`,
        and the holder is told of the contention all the same.

        :param timeout: for each reply from accmond.
        """
        request = claim_request(connections, kind=kind, vendor=vendor, product=product, protocol=protocol,
                                serial=serial, count=count, wait=wait, reason=reason,
                                max_seconds=max_seconds)  # fmt: skip
        user = self.allow(as_user) if as_user is not None else None
        taken = take_claim(self.socket, request, user, timeout=timeout)
        self._taken = [claim for claim in self._taken if claim.process.poll() is None] + [taken]
        return taken

    def _end_taken_claims(self) -> None:
        """Closes the connections of the claims :meth:`take` made and waits for their processes."""
        for claim in self._taken:
            claim._link.close()
            try:
                claim.process.wait(10)
            except subprocess.TimeoutExpired:
                claim.process.kill()
                claim.process.wait()
        self._taken = []

    def break_claim(self, target: ReleaseTarget, reason: str = "broken by the test") -> None:
        """Breaks the claim on `target` (a connection id, an accessory or its id, a claim id or a claim object) as
        an admin does (``accmon release --force``): its holder is told ``broken``, by whom and `reason`.

        :raises ProtocolError: ``no-such-claim`` when nothing holds it.
        """
        self.client().release(target, force=True, reason=reason)

    def claims(self) -> ClaimList:
        """The claims and the claimers waiting in line now."""
        return self.client().claims()

    def claim_on(self, connection_id: int) -> Optional[ClaimSummary]:
        """The claim that holds this connection now, or ``None``."""
        return self.claims().on(connection_id)
