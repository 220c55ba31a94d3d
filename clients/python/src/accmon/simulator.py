"""A private ``accmond --simulate --no-udev`` for tests: :class:`SimulatedDaemon`.

It runs the real daemon on a temporary socket, with a temporary state directory and a manifest that allows every
accessory to this user and makes this user an admin (accmond enforces its manifest also when it simulates, see
docs/MANIFEST.md), and plugs and unplugs simulated accessories through the protocol's ``simulate`` request. The
pytest plugin :mod:`accmon.testing` wraps it in a fixture; any other test framework can use it directly:

.. code-block:: python

    with SimulatedDaemon() as daemon:
        connection_id = daemon.plug(kind="serial", vendor="0403", product="6001", nodes=["/dev/ttyUSB0"])
        ...
        daemon.unplug(connection_id)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket as socket_module
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Type

from .client import Client
from .filters import IdLike
from .model import Snapshot

__all__ = ["ACCMOND_ENVIRONMENT_VARIABLE", "SimulatedDaemon", "find_accmond", "permissive_manifest"]

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


def permissive_manifest(uid: Optional[int] = None) -> Dict[str, Any]:
    """A manifest that allows every accessory, shows it to `uid` (default: this user), and makes `uid` an admin,
    so that it may ``simulate``."""
    user = os.getuid() if uid is None else uid
    return {
        "version": 1,
        "admins": {"users": [user]},
        "accessories": [{"name": "everything", "match": {"id": "*:*"}, "access": {"users": [user]}}],
    }


class SimulatedDaemon:
    """A real ``accmond --simulate --no-udev`` in a temporary directory; see the module's documentation.

    :param accmond: the binary (default: :func:`find_accmond`).
    :param manifest: the manifest, as a JSON-able dict (default: :func:`permissive_manifest`).
    :param arguments: more options for accmond (such as ``["--max-client-buffer", "4096"]``).
    :param startup_timeout: seconds to wait for the socket to accept connections.
    """

    def __init__(
        self,
        accmond: Optional[str] = None,
        *,
        manifest: Optional[Dict[str, Any]] = None,
        arguments: Sequence[str] = (),
        startup_timeout: float = 10.0,
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
        os.makedirs(self.manifest_dir)
        with open(self.manifest_path, "w") as out:
            json.dump(manifest if manifest is not None else permissive_manifest(), out, indent=2)
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self._client: Optional[Client] = None

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
                   "--manifest", self.manifest_path, "--manifest-dir", self.manifest_dir, *self.arguments]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"accmon.testing: accmond exited with status {self._process.returncode} at "
                                   f"start:\n{self.log()}")  # fmt: skip
            if self._accepts():
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

    def client(self) -> Client:
        """A blocking client of this daemon (shared; closed when the daemon stops)."""
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
        """The accessories connected now."""
        return self.client().list()

    def _drop_client(self) -> None:
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
        """Stops accmond (SIGTERM) and starts it again with the same socket and state directory."""
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
        """Stops accmond and removes the temporary directory; returns accmond's exit status."""
        try:
            return self.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
