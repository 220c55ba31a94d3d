"""An app in a sandbox made the way Flatpak makes one, that opens a serial accessory it could never reach otherwise:
bubblewrap with no /dev beyond the minimal set, no /run/accmon, no host /sys, and the system bus only through
xdg-dbus-proxy with --talk=org.accmon.Accmon1 alone (sandbox/app.py).

The node is the app's user's own (mode 0600, not in its group): that user could open it by its own permissions, and
the test bus has no polkit to decide otherwise (polkit's decision for a user who could not is tested under the
booted systemd, packaging/systemd-test). In the sandbox the node does not exist: only accmond's descriptor reaches it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from busrig import MANAGER, PrivateBus, PrivatePty, as_user, eventually, user_ids

from accmon.simulator import SimulatedDaemon

APP = Path(__file__).resolve().parent / "sandbox" / "app.py"
USER = "www-data"


@pytest.fixture
def sandbox_dir() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="accmon-sandbox-")
    uid, gid = user_ids(USER)
    os.chown(directory, uid, gid)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _line(process: "subprocess.Popen[str]") -> Dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the app ended: {process.stderr.read() if process.stderr else ''}"
    return dict(json.loads(line))


def test_a_sandboxed_app_opens_a_serial_accessory_through_the_bus_alone(
    bus: PrivateBus, daemon: SimulatedDaemon, sandbox_dir: str
) -> None:
    uid, _ = user_ids(USER)
    pty = PrivatePty(daemon.nodes_dir, group=0, mode=0o600)
    proxy = None
    app = None
    try:
        os.chown(pty.node, uid, 0)
        connection = daemon.plug("serial", vendor="1546", product="01a8", name="GPS console", nodes=[pty.node])
        proxy_socket = os.path.join(sandbox_dir, "bus")
        proxy = subprocess.Popen(
            [*as_user(USER), "xdg-dbus-proxy", bus.address, proxy_socket, "--filter", "--talk=org.accmon.Accmon1"],
            stderr=subprocess.PIPE, text=True)  # fmt: skip
        eventually(lambda: os.path.exists(proxy_socket), 10, "xdg-dbus-proxy's socket")
        app = subprocess.Popen(
            [*as_user(USER), "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
             "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
             "--bind", proxy_socket, "/run/dbus/system_bus_socket", "--ro-bind", str(APP), "/app/app.py",
             "--setenv", "DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/dbus/system_bus_socket",
             "/usr/bin/python3", "/app/app.py", pty.node],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert _line(app) == {"step": "sandbox", "node_visible": False, "socket_visible": False, "sys_visible": False}
        assert _line(app) == {"step": "found", "path": f"{MANAGER}/accessories/{connection}"}
        opened = _line(app)
        assert opened["step"] == "opened" and opened["claim"].startswith("/org/accmon/Accmon1/claims/"), opened
        assert pty.read() == b"hello from the sandbox"
        os.write(pty.master, b"hello from the accessory")
        assert app.stdin is not None
        app.stdin.write("go\n")
        app.stdin.flush()
        assert _line(app) == {"step": "read", "data": "hello from the accessory"}
        daemon.break_claim(connection, reason="admin needs it")
        app.stdin.write("go\n")
        app.stdin.flush()
        broken = _line(app)
        assert broken["broken"] and broken["broken"][0]["kind"] == "broken", broken
        assert broken["broken"][0]["reason"] == "admin needs it"
        assert broken["write_after"] == "Input/output error", broken
    finally:
        for process in (app, proxy):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
        pty.close()
