"""The pytest plugin's part in check-out: its accmond plugged from two threads at once, simulated accessories and an
app's view across restart(), the helpers that take an app's accessory from it (another user, a break, a reset, the
holder dying), its device nodes below --simulated-nodes, and the example test run as a user runs it."""

from __future__ import annotations

import asyncio
import grp
import os
import pwd
import shutil
import stat
import subprocess
import threading
from pathlib import Path
from typing import Dict, List

import pytest

import accmon
from accmon.simulator import SimulatedDaemon
from conftest import PYTHON_ROOT, require_root, run_python

CLAIMS_EXAMPLE = PYTHON_ROOT / "examples" / "test_console_claims.py"


def test_plugging_from_two_threads_at_once(accmond: SimulatedDaemon) -> None:
    """The natural way to test code blocked in wait_for is a timer thread that plugs; the test's own thread plugs
    too. 200 plugs and 100 unplugs from two threads through the fixture's one shared client."""
    plugged: Dict[str, List[int]] = {"timer": [], "test": []}

    def plug_many(name: str) -> None:
        for index in range(100):
            plugged[name].append(accmond.plug(kind="usb", vendor="1209", serial=f"{name}-{index}"))
            if index % 2:
                accmond.unplug(plugged[name][-2])

    timer = threading.Timer(0.0, plug_many, ("timer",))
    timer.start()
    plug_many("test")
    timer.join(60)
    every = plugged["timer"] + plugged["test"]
    assert len(every) == len(set(every)) == 200
    listed = {accessory.serial_number for accessory in accmond.list()}
    assert listed == {f"{name}-{index}" for name in plugged for index in range(1, 100, 2)}


def test_a_timer_plugs_while_the_code_under_test_waits(accmond: SimulatedDaemon) -> None:
    timer = threading.Timer(0.2, lambda: accmond.plug(kind="serial", vendor="0403", nodes=["/dev/ttyUSB7"]))
    timer.start()
    for _ in range(20):  # meanwhile, the test's thread drives the daemon too
        accmond.unplug(accmond.plug(kind="usb"))
    assert accmon.Client().wait_for(kind="serial", timeout=10).device_node == "/dev/ttyUSB7"
    timer.join()


def test_simulated_accessories_and_an_apps_view_survive_restart(accmond: SimulatedDaemon) -> None:
    adapter = accmond.plug(kind="serial", vendor="0403", serial="A1", nodes=["/dev/ttyUSB0"])

    async def app() -> None:
        async with accmon.Session("app", socket=accmond.socket) as session:
            assert [a.connection_id for a in session.accessories] == [adapter]
            events = session.events()
            await asyncio.get_running_loop().run_in_executor(None, accmond.restart)
            while not session.connected or session._connection is None or session._connection.session_id == "":
                await asyncio.sleep(0.01)
            mouse = accmond.plug(kind="usb", vendor="046d")
            event = await asyncio.wait_for(events.__anext__(), 10)  # no disconnect of the adapter came first
            assert (event.change, event.accessory.connection_id) == ("connect", mouse)
            assert [a.connection_id for a in session.current] == [adapter, mouse]

    asyncio.run(asyncio.wait_for(app(), 60))
    assert [(a.connection_id, a.serial_number) for a in accmond.list()][0] == (adapter, "A1")


def test_a_held_claim_survives_restart(accmond: SimulatedDaemon) -> None:
    adapter = accmond.plug(kind="serial", vendor="0403", nodes=[accmond.make_node("ttyUSB0")])
    with accmon.Client() as client:
        claim = client.claim(adapter, reason="across the restart")
        accmond.restart()
        assert accmond.claim_on(adapter) is not None  # kept for its holder, who comes back with its token
        with client.claim(token=claim.token) as again:
            assert again.claim_id == claim.claim_id and again.accessories[0].connection_id == adapter


def test_the_holder_dying_gives_the_accessory_to_the_next_in_line(accmond: SimulatedDaemon) -> None:
    adapter = accmond.plug(kind="serial", vendor="0403")
    holder = accmond.take(adapter, reason="first")
    with accmon.Client() as client:
        releaser = threading.Timer(0.2, holder.kill)
        releaser.start()
        with client.claim(adapter, wait=True, timeout=10) as claim:
            assert claim.state == "held"
        releaser.join()
    assert holder.process.returncode == -9
    assert holder.wait_ended(1) is None and not holder.active  # ended by this side


def test_take_as_another_user_opens_the_socket_and_the_manifest_to_that_user(accmond: SimulatedDaemon) -> None:
    require_root("another user")
    assert stat.S_IMODE(os.stat(accmond.directory).st_mode) == 0o700  # private until a user is let in
    assert stat.S_IMODE(os.stat(accmond.socket).st_mode) & 0o002 == 0
    adapter = accmond.plug(kind="serial", vendor="0403")
    with accmond.take(adapter, as_user="nobody", reason="r") as taken:
        assert (taken.user.name, taken.holder.uid, taken.holder.pid) == ("nobody", 65534, taken.process.pid)
        assert stat.S_IMODE(os.stat(accmond.directory).st_mode) == 0o711
        assert stat.S_IMODE(os.stat(accmond.socket).st_mode) == 0o666
        on = accmond.claim_on(adapter)
        assert on is not None and on.claim_id == taken.claim_id and on.holder.name == "nobody"
        accmond.restart()  # the socket is made again: it is opened to the users again
        assert stat.S_IMODE(os.stat(accmond.socket).st_mode) == 0o666
    with pytest.raises(KeyError):
        accmond.take(adapter, as_user="no-such-user-here")


def test_the_fixture_runs_accmond_with_its_own_simulated_nodes_directory(accmond: SimulatedDaemon) -> None:
    with open(f"/proc/{accmond.pid}/cmdline", "rb") as cmdline:
        arguments = cmdline.read().decode().split("\0")
    assert arguments[arguments.index("--simulated-nodes") + 1] == accmond.nodes_dir
    assert Path(accmond.nodes_dir).parent == Path(accmond.directory)
    node = accmond.make_node("ttyACM0", mode=0o640, group="dialout")
    status = os.stat(node)
    assert (node, stat.S_IMODE(status.st_mode), status.st_gid) == (
        f"{accmond.nodes_dir}/ttyACM0", 0o640, grp.getgrnam("dialout").gr_gid)  # fmt: skip
    with pytest.raises(FileExistsError):
        accmond.make_node("ttyACM0")
    with pytest.raises(ValueError):
        accmond.make_node("../escape")


def open_as(user: str, group: str, path: str) -> str:
    """Opens `path` for reading and writing as `user` with `group` among its groups: "ok" or the error's name."""
    done = subprocess.run(["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}",
                           f"--groups={grp.getgrnam(group).gr_gid}",
                           "/usr/bin/python3", "-I", "-c", "import os, sys\ntry:\n os.close(os.open(sys.argv[1], os.O_RDWR))"
                           "\n print('ok')\nexcept OSError as e:\n print(type(e).__name__)", path],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return done.stdout.strip() or done.stderr


def test_a_claim_on_a_simulated_node_is_enforced_or_says_why_not(accmond: SimulatedDaemon) -> None:
    """accmond enforces claims on simulated nodes below --simulated-nodes itself; a build that does not yet says so
    on each node (`enforced` false, with a note) and leaves the node as it was. Either way, what it says holds."""
    require_root("another member of the node's group")
    node = accmond.make_node("ttyUSB0", mode=0o660, group="dialout")
    adapter = accmond.plug(kind="serial", vendor="0403", nodes=[node])
    before = os.stat(node)
    assert open_as("nobody", "dialout", node) == "ok"  # a member of the node's group opens it while it is free
    with accmon.Client() as client, client.claim(adapter) as claim:
        (claimed,) = claim.nodes
        assert claimed.path == node
        if claimed.enforced:
            assert open_as("nobody", "dialout", node) == "PermissionError"
            assert open_as("root", "dialout", node) == "ok"
        else:
            assert claimed.note, "a node that is not enforced says why"
            assert open_as("nobody", "dialout", node) == "ok"
            after = os.stat(node)
            assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    after = os.stat(node)
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    assert os.listxattr(node) == [] or "system.posix_acl_access" not in os.listxattr(node)
    assert open_as("nobody", "dialout", node) == "ok"


def test_the_claims_example_passes_as_a_user_runs_it(tmp_path: Path) -> None:
    shutil.copy(CLAIMS_EXAMPLE, tmp_path / CLAIMS_EXAMPLE.name)
    done = run_python(["-m", "pytest", "-p", "accmon.testing", "-q", "-p", "no:cacheprovider",
                       str(tmp_path / CLAIMS_EXAMPLE.name), "--rootdir", str(tmp_path)], timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_closing_ends_what_take_left_running_and_reenumerate_names_a_missing_connection() -> None:
    with SimulatedDaemon() as daemon:
        adapter = daemon.plug(kind="serial", vendor="0403")
        taken = daemon.take(adapter)
        with pytest.raises(accmon.ProtocolError) as caught:
            daemon.reenumerate(99)
        assert caught.value.code == "no-such-connection"
        assert [accessory.connection_id for accessory in daemon.list()] == [adapter]  # nothing was unplugged
        assert taken.process.poll() is None
    assert taken.process.returncode == 0  # its relay ended with the connection, before accmond stopped


def test_a_board_entering_its_bootloader_keeps_its_claim_by_its_port() -> None:
    with SimulatedDaemon(return_seconds=5) as daemon:
        board = daemon.plug(kind="serial", vendor="2e8a", product="000a", serial="E66", port="1-1.3",
                            nodes=[daemon.make_node("ttyACM0")])  # fmt: skip
        with accmon.Client(daemon.socket) as client, client.claim(board) as claim:
            bootloader = daemon.reenumerate(board, product="0003")  # other ids, the same USB port
            kinds = [notice.kind for notice in [claim.next_notice(10), claim.next_notice(10)] if notice]
            assert kinds == ["returning", "returned"]
            (accessory,) = claim.accessories
            assert (accessory.connection_id, accessory.product_id, accessory.port_path) == (bootloader, "0003", "1-1.3")
            assert accessory.accessory_id != "serial:2e8a:000a:serial=E66"
