"""A private ``accmond --simulate --no-udev`` for tests: :class:`SimulatedDaemon`.

It runs the real daemon on a temporary socket, with a temporary state directory and a manifest that allows every
accessory to this user and makes this user an admin (accmond enforces its manifest also when it simulates, see
docs/MANIFEST.md), and plugs and unplugs simulated accessories through the protocol's ``simulate`` request. The
simulated accessories stand for hardware: they stay plugged in across :meth:`SimulatedDaemon.restart`, with their
connection ids. Claims on their device nodes below :attr:`SimulatedDaemon.nodes_dir` (``--simulated-nodes``) are
enforced by accmond itself. The pytest plugin :mod:`accmon.testing` wraps it in a fixture; any other test framework
can use it directly:

.. code-block:: python

    with SimulatedDaemon() as daemon:
        connection_id = daemon.plug(kind="serial", vendor="0403", product="6001", nodes=[daemon.make_node("ttyUSB0")])
        ...
        daemon.break_claim(connection_id, reason="the bench is needed")
        daemon.unplug(connection_id)
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import signal
import socket as socket_module
import subprocess
import tempfile
import threading
import time
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Type, Union

from .client import Client
from .errors import ProtocolError
from .filters import IdLike
from .model import Snapshot
from .simulator_claims import Account, ClaimHelpers, TakenClaim, account

__all__ = [
    "ACCMOND_ENVIRONMENT_VARIABLE",
    "SimulatedDaemon",
    "TakenClaim",
    "find_accmond",
    "permissive_manifest",
]

#: The environment variable that names the ``accmond`` to run.
ACCMOND_ENVIRONMENT_VARIABLE = "ACCMON_ACCMOND"
#: Where the Debian package installs accmond (not on a normal user's PATH).
_PACKAGED_ACCMOND = "/usr/sbin/accmond"


def find_accmond(explicit: Optional[str] = None) -> str:
    """The ``accmond`` to run: `explicit` when given, else ``$ACCMON_ACCMOND``, else ``accmond`` on ``PATH``, else
    ``/usr/sbin/accmond``.

    :raises FileNotFoundError: when none of them is an executable file; the message lists what was tried.
    """
    tried: List[str] = []
    for source, candidate in (
        ("given", explicit),
        (f"${ACCMOND_ENVIRONMENT_VARIABLE}", os.environ.get(ACCMOND_ENVIRONMENT_VARIABLE) or None),
    ):
        if candidate is not None:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return os.path.abspath(candidate)
            raise FileNotFoundError(f"accmon.testing: accmond: {source} path '{candidate}' is not an executable file")
    on_path = shutil.which("accmond")
    if on_path is not None:
        return on_path
    tried.append("accmond on PATH")
    if os.access(_PACKAGED_ACCMOND, os.X_OK):
        return _PACKAGED_ACCMOND
    tried.append(_PACKAGED_ACCMOND)
    raise FileNotFoundError(
        f"accmon.testing: accmond: not found ({', '.join(tried)}); install the accmon package, or name it with "
        f"--accmond PATH or ${ACCMOND_ENVIRONMENT_VARIABLE}"
    )


def permissive_manifest(
    uid: Optional[int] = None, users: Sequence[Union[str, int]] = (), return_seconds: Optional[float] = None
) -> Dict[str, Any]:
    """A manifest that allows every accessory, shows it to `uid` (default: this user) and to `users`, and makes `uid`
    an admin, so that it may ``simulate`` and break claims. `return_seconds`: how long a claim waits for its
    accessory to come back after its connection ended (accmond's default: 10 s)."""
    user = os.getuid() if uid is None else uid
    entry: Dict[str, Any] = {"name": "everything", "match": {"id": "*:*"}, "access": {"users": [user, *users]}}
    if return_seconds is not None:
        entry["claim"] = {"returnSeconds": return_seconds}
    return {"version": 1, "admins": {"users": [user]}, "accessories": [entry]}


_OPTIONS_OF: Dict[str, str] = {}


def _supports(accmond: str, option: str) -> bool:
    """Whether this accmond's ``--help`` lists `option` (an older accmond refuses an option it does not know)."""
    if accmond not in _OPTIONS_OF:
        try:
            done = subprocess.run([accmond, "--help"], capture_output=True, text=True, timeout=30)
            _OPTIONS_OF[accmond] = done.stdout + done.stderr
        except (OSError, subprocess.SubprocessError):
            _OPTIONS_OF[accmond] = ""
    return option in _OPTIONS_OF[accmond]


class SimulatedDaemon(ClaimHelpers):
    """A real ``accmond --simulate --no-udev`` in a temporary directory; see the module's documentation.

    Its methods may be called from any thread (a timer's ``plug`` while the test's thread plugs too).

    :param accmond: the binary (default: :func:`find_accmond`).
    :param manifest: the manifest, as a JSON-able dict (default: :func:`permissive_manifest` with `users` and
        `return_seconds`).
    :param arguments: more options for accmond (such as ``["--max-client-buffer", "4096"]``).
    :param startup_timeout: seconds to wait for the socket to accept connections.
    :param users: other users (names or uids) who may see and claim the accessories and connect to the socket
        (:meth:`allow`).
    :param return_seconds: how long a claim waits for its accessory to come back (default manifest only).
    """

    def __init__(
        self,
        accmond: Optional[str] = None,
        *,
        manifest: Optional[Dict[str, Any]] = None,
        arguments: Sequence[str] = (),
        startup_timeout: float = 10.0,
        users: Sequence[Union[str, int]] = (),
        return_seconds: Optional[float] = None,
    ) -> None:
        self.accmond = find_accmond(accmond)
        self.arguments = list(arguments)
        self.startup_timeout = startup_timeout
        # Under /tmp rather than pytest's tmp_path: a socket path may not be longer than 107 bytes.
        self.directory = tempfile.mkdtemp(prefix="accmon-sim-")
        #: The socket clients connect to.
        self.socket = os.path.join(self.directory, "accmon.sock")
        #: The state directory, kept across :meth:`restart` (and :meth:`kill`), as on a real host.
        self.state_dir = os.path.join(self.directory, "state")
        self.manifest_path = os.path.join(self.directory, "manifest.json")
        self.manifest_dir = os.path.join(self.directory, "manifest.d")
        #: accmond's standard error, appended across restarts.
        self.log_path = os.path.join(self.directory, "accmond.log")
        #: Where :meth:`make_node` makes device nodes: accmond enforces claims on the nodes below it
        #: (``--simulated-nodes``).
        self.nodes_dir = os.path.join(self.directory, "nodes")
        os.makedirs(self.manifest_dir)
        os.mkdir(self.nodes_dir)
        os.chmod(self.nodes_dir, 0o755)
        self._own_manifest = manifest is None
        self._return_seconds = return_seconds
        self._allowed: List[Account] = []
        self._taken: List[TakenClaim] = []
        self._write_manifest(manifest if manifest is not None else permissive_manifest(return_seconds=return_seconds))
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self._client: Optional[Client] = None
        self._lock = threading.RLock()
        for user in users:
            self.allow(user)

    def _write_manifest(self, manifest: Dict[str, Any]) -> None:
        with open(self.manifest_path, "w") as out:
            json.dump(manifest, out, indent=2)

    def __enter__(self) -> "SimulatedDaemon":
        self.start()
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        """The daemon's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Starts accmond and waits until its socket accepts connections.

        :raises RuntimeError: when it exits or does not listen within the start-up timeout (with its log).
        """
        if self.running:
            raise RuntimeError("accmon.testing: accmond runs already")
        command = [self.accmond, "--simulate", "--no-udev", "--socket", self.socket, "--state-dir", self.state_dir,
                   "--manifest", self.manifest_path, "--manifest-dir", self.manifest_dir]  # fmt: skip
        if _supports(self.accmond, "--simulated-nodes"):
            command += ["--simulated-nodes", self.nodes_dir]
        command += self.arguments
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"accmon.testing: accmond exited with status {self._process.returncode} at "
                                   f"start:\n{self.log()}")  # fmt: skip
            if self._accepts():
                if self._allowed:
                    self._open_socket()
                return
            time.sleep(0.005)
        self.kill()
        raise RuntimeError(f"accmon.testing: accmond did not listen on {self.socket} within "
                           f"{self.startup_timeout} s:\n{self.log()}")  # fmt: skip

    def _accepts(self) -> bool:
        probe = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
        try:
            probe.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def _open_socket(self) -> None:
        """Lets other users reach the socket: the directory is searchable (not listable), the socket writable by all;
        the manifest decides what each user may see and do."""
        os.chmod(self.directory, 0o711)
        os.chmod(self.socket, 0o666)

    def allow(self, user: Union[str, int]) -> Account:
        """Lets `user` (a name or uid) connect to the socket and, with the default manifest, see and claim every
        accessory (the manifest is written again and reloaded when accmond runs); returns the user's account.

        :raises KeyError: when there is no such user.
        """
        with self._lock:
            found = account(user)
            if found.uid == os.getuid() or any(known.uid == found.uid for known in self._allowed):
                return found
            self._allowed.append(found)
            if self._own_manifest:
                users = [known.uid for known in self._allowed]
                self._write_manifest(permissive_manifest(users=users, return_seconds=self._return_seconds))
                if self.running:
                    self.client().reload_manifest()
            if self.running:
                self._open_socket()
            return found

    def client(self) -> Client:
        """A blocking client of this daemon (shared by every thread; closed when the daemon stops)."""
        with self._lock:
            if self._client is None:
                self._client = Client(self.socket, "accmon.testing")
            return self._client

    def plug(
        self,
        kind: str = "usb",
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
    ) -> int:
        """Plugs in a simulated accessory; returns its connection id once every subscriber has been sent its
        ``connect``. The options are those of ``accmon simulate connect``."""
        return self.client().simulate_connect(
            kind, vendor=vendor, product=product, name=name, manufacturer=manufacturer, model=model, serial=serial,
            firmware=firmware, hardware=hardware, protocols=protocols, nodes=nodes, sysfs=sysfs, port=port,
            interface=interface, accessory_id=accessory_id,
        )  # fmt: skip

    def unplug(self, connection_id: int) -> None:
        """Unplugs the simulated accessory with this connection id.

        :raises ProtocolError: ``no-such-connection`` when it is not connected.
        """
        self.client().simulate_disconnect(connection_id)

    def list(self) -> Snapshot:
        """The accessories connected now, with their claims (:attr:`~accmon.Snapshot.claims`)."""
        return self.client().list(claims=True)

    def reenumerate(self, connection_id: int, *, vendor: IdLike = None, product: IdLike = None) -> int:
        """Unplugs the accessory and plugs it in again, as a board that resets or enters its bootloader does: a new
        connection of the same accessory (the same accessory id, unless `vendor` or `product` give the ids the
        bootloader presents; the same port path either way). Returns the new connection id; a claim on the accessory
        follows it (``returning``, then ``returned``).

        :raises ProtocolError: ``no-such-connection`` when it is not connected.
        """
        found = [accessory for accessory in self.client().list(all=True) if accessory.connection_id == connection_id]
        if not found:
            raise ProtocolError("no-such-connection", f"accmon.testing: reenumerate: connection {connection_id} is "
                                "not connected")  # fmt: skip
        self.unplug(connection_id)
        old = found[0]
        same = vendor is None and product is None
        return self.plug(
            old.kind, vendor=old.vendor_id if vendor is None else vendor, name=old.name,
            product=old.product_id if product is None else product, manufacturer=old.manufacturer,
            model=old.model_number, serial=old.serial_number, firmware=old.firmware_revision,
            hardware=old.hardware_revision, protocols=old.protocol_strings, nodes=old.device_nodes,
            sysfs=old.sysfs_path, port=old.port_path, interface=old.interface_number,
            accessory_id=old.accessory_id if same else None,
        )  # fmt: skip

    def make_node(self, name: str, *, mode: int = 0o660, group: Union[str, int, None] = None) -> str:
        """Makes a device node for a simulated accessory below :attr:`nodes_dir` (a regular file standing for the
        device: what the app writes there stays there) and returns its path, for ``plug(nodes=[...])``. Every user
        reaches it (the temporary directory becomes searchable, as ``/dev`` is); its mode and group decide who opens
        it, and accmond enforces claims on it: while claimed, only the holder and root may open it.

        :param mode: its permissions.
        :param group: its group (a name or gid), such as ``"dialout"``.
        """
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"accmon.testing: make_node: '{name}' is not a file name")
        path = os.path.join(self.nodes_dir, name)
        os.chmod(self.directory, 0o711)  # as /dev is: every user reaches the node; its own mode decides who opens it
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, mode)
        try:
            os.fchmod(descriptor, mode)  # whatever the umask
            if group is not None:
                os.fchown(descriptor, -1, group if isinstance(group, int) else grp.getgrnam(group).gr_gid)
        finally:
            os.close(descriptor)
        return path

    def _drop_client(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Stops accmond with SIGTERM (SIGKILL after `timeout`); returns its exit status (``None`` if it was not
        running). Connected clients get the protocol's ``shutdown`` message."""
        self._drop_client()
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def kill(self) -> None:
        """Kills accmond with SIGKILL, as a crash would (the state directory keeps what it had saved)."""
        self._drop_client()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()

    def restart(self) -> None:
        """Stops accmond (SIGTERM) and starts it again with the same socket and state directory. The simulated
        accessories stay plugged in (as hardware would), with their connection ids; claims wait for their holders
        to come back with their tokens (accmond's ``--claim-reclaim``, 30 s by default)."""
        self.stop()
        self.start()

    def exit_status(self) -> Optional[int]:
        """accmond's exit status if it has exited by itself, else ``None`` (running, or stopped by this object)."""
        return self._process.poll() if self._process is not None else None

    def log(self) -> str:
        """What accmond wrote to standard error so far."""
        try:
            with open(self.log_path, errors="replace") as log:
                return log.read()
        except OSError:
            return ""

    def close(self) -> Optional[int]:
        """Ends the claims :meth:`take` made, stops accmond and removes the temporary directory; returns accmond's
        exit status."""
        self._end_taken_claims()
        try:
            return self.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
