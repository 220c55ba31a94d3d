"""Every error class, each caused for real: no daemon, another user refused by the socket or by the daemon, the
protocol's error codes, a daemon that dies or stops, and a peer that does not speak the protocol."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import accmon
import accmon.wire
from accmon.simulator import SimulatedDaemon
from accmon.wire import accmond_running
from conftest import ACCMOND, SOURCE, child_environment, require_root


@pytest.fixture
def short_dir() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="accmon-test-")
    yield directory
    subprocess.run(["rm", "-rf", directory], check=True)


def test_no_socket_is_daemon_unreachable_naming_the_socket(short_dir: str) -> None:
    path = os.path.join(short_dir, "missing.sock")
    with pytest.raises(accmon.DaemonUnreachable) as caught:
        accmon.Client(path).list()
    error = caught.value
    assert (error.socket, error.reason, error.code) == (path, "No such file or directory", "daemon-unreachable")
    assert error.daemon_running == accmond_running()
    assert str(error).startswith(f"accmon: cannot connect to '{path}': No such file or directory; accmond is ")
    assert isinstance(error, ConnectionError) and isinstance(error, accmon.AccmonError)


def test_a_socket_nobody_listens_on_is_daemon_unreachable_async(short_dir: str) -> None:
    path = os.path.join(short_dir, "stale.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)  # bound, never listening: what a crashed daemon leaves behind
    stale.close()

    async def connect() -> None:
        await accmon.connect(path)

    with pytest.raises(accmon.DaemonUnreachable, match=f"'{path}': Connection refused"):
        asyncio.run(connect())


def test_the_message_says_whether_accmond_runs(accmond: SimulatedDaemon, short_dir: str) -> None:
    assert accmond_running() is True  # the fixture's daemon
    with pytest.raises(accmon.DaemonUnreachable) as caught:
        accmon.Client(os.path.join(short_dir, "elsewhere.sock")).list()
    assert caught.value.daemon_running is True
    assert "accmond is running, but not on this socket" in str(caught.value)
    stopped = accmon.DaemonUnreachable("/run/accmon/accmon.sock", "No such file or directory", False)
    assert "accmond is not running: start it" in str(stopped)


NOBODY_SCRIPT = """
import json, sys, accmon
outcome = {}
for name, call in [
    ("list", lambda c: c.list()),
    ("list_all", lambda c: c.list(all=True)),
    ("simulate", lambda c: c.simulate_connect("usb")),
]:
    try:
        with accmon.Client(sys.argv[1]) as client:
            outcome[name] = ["ok", len(call(client))] if name.startswith("list") else ["ok", call(client)]
    except accmon.AccmonError as error:
        outcome[name] = [type(error).__name__, error.code, str(error), isinstance(error, PermissionError)]
print(json.dumps(outcome))
"""


def as_nobody(source: str, *arguments: str) -> "subprocess.CompletedProcess[str]":
    """Runs Debian's python3 as the user nobody, with the package copied to `source`, which nobody can read
    wherever this tree is."""
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", *arguments]
    environment = child_environment(PYTHONPATH=source)
    return subprocess.run(command, capture_output=True, text=True, timeout=30, env=environment, cwd="/")


def test_permission_denied_for_another_user_by_the_socket_and_by_the_daemon(
    accmond: SimulatedDaemon, short_dir: str
) -> None:
    require_root("setpriv to the user nobody")
    shutil.copytree(SOURCE / "accmon", os.path.join(short_dir, "accmon"), ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(short_dir, 0o755)
    accmond.plug(kind="usb", vendor="1209")
    os.chmod(accmond.directory, 0o755)
    os.chmod(accmond.socket, 0o755)  # accmond's default: only its owner may connect
    refused = json.loads(as_nobody(short_dir, "-c", NOBODY_SCRIPT, accmond.socket).stdout)
    for name in ("list", "list_all", "simulate"):
        kind, code, message, is_permission_error = refused[name]
        assert (kind, code, is_permission_error) == ("PermissionDenied", "permission-denied", True)
        assert message.startswith(f"accmon: cannot connect to '{accmond.socket}': Permission denied; ")
    cli = as_nobody(short_dir, "-m", "accmon", "--socket", accmond.socket, "list")
    assert (cli.returncode, cli.stdout) == (77, "")
    assert "Permission denied; is this user in the 'accmon' group?" in cli.stderr

    os.chmod(accmond.socket, 0o777)  # now the daemon decides: nobody is not in the manifest's access or admins
    answered = json.loads(as_nobody(short_dir, "-c", NOBODY_SCRIPT, accmond.socket).stdout)
    assert answered["list"] == ["ok", 0]  # connected, and sees nothing
    assert answered["list_all"][:2] == ["PermissionDenied", "permission-denied"]
    assert "list: all: uid 65534: only root and the manifest's admins may do this" in answered["list_all"][2]
    assert answered["simulate"][:2] == ["PermissionDenied", "permission-denied"]
    cli = as_nobody(short_dir, "-m", "accmon", "--socket", accmond.socket, "list", "--all")
    assert cli.returncode == 77 and "only root and the manifest's admins" in cli.stderr


def raw_request(daemon: SimulatedDaemon, request: Dict[str, Any]) -> accmon.ProtocolError:
    with accmon.Client(daemon.socket) as client, pytest.raises(accmon.ProtocolError) as caught:
        client._request(request, "ok")
    return caught.value


@pytest.mark.parametrize(
    ("request_", "code", "message"),
    [
        ({"type": "Status"}, "unknown-type", "message: type: unknown type 'Status'"),
        ({"type": "simulate", "action": "connect"}, "missing-field", "simulate: accessory: field 'accessory' is missing"),
        ({"type": "list", "filter": {"vendorId": "x"}}, "invalid-field", "list: filter.vendorId: unknown filter key"),
        ({"type": "list", "pad": "x" * 70000}, "line-too-long", "message: line: longer than 65536 bytes"),
        ({"type": "hello", "versions": [1]}, "already-greeted", "hello: session: already greeted"),
    ],
)
def test_error_replies_are_protocol_errors_with_their_code(
    accmond: SimulatedDaemon, request_: Dict[str, Any], code: str, message: str
) -> None:
    error = raw_request(accmond, request_)
    assert (error.code, type(error)) == (code, accmon.ProtocolError)
    assert error.message.startswith(message)
    assert code in accmon.PROTOCOL_ERROR_CODES


def test_a_daemon_that_speaks_no_version_of_ours_is_unsupported_version(
    accmond: SimulatedDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accmon.wire, "SUPPORTED_VERSIONS", (7,))
    with pytest.raises(accmon.ProtocolError) as caught:
        accmon.Client().list()
    assert caught.value.code == "unsupported-version"
    assert caught.value.message.startswith("hello: versions: none of [7] is spoken here")


def test_the_protocol_errors_of_the_public_api(accmond: SimulatedDaemon) -> None:
    async def scenario() -> None:
        async with accmon.connect() as conn:
            with pytest.raises(accmon.ProtocolError) as caught:
                await conn.unsubscribe()
            assert caught.value.code == "not-subscribed"
            await conn.subscribe()
            with pytest.raises(accmon.ProtocolError) as caught:
                await conn.subscribe()
            assert repr(caught.value) == "ProtocolError('already-subscribed', 'subscribe: session: already subscribed')"
            with pytest.raises(accmon.ProtocolError) as caught:
                await conn.simulate_disconnect(99)
            assert caught.value.code == "no-such-connection"
        async with accmon.Session("held", socket=accmond.socket):
            with pytest.raises(accmon.ProtocolError) as caught:
                await accmon.Session("held", socket=accmond.socket).start()
            assert caught.value.code == "restore-id-in-use"

    asyncio.run(scenario())
    Path(accmond.manifest_dir, "50-broken.json").write_text('{"version": 1, "accessories": [')
    with pytest.raises(accmon.ProtocolError) as caught:
        accmon.Client().reload_manifest()
    assert caught.value.code == "manifest-invalid" and "50-broken.json:1:" in caught.value.message


def test_simulate_without_simulation_is_simulation_disabled(short_dir: str) -> None:
    path = os.path.join(short_dir, "plain.sock")
    manifest = os.path.join(short_dir, "manifest.json")
    Path(manifest).write_text(json.dumps(accmon.simulator.permissive_manifest()))
    daemon = subprocess.Popen(
        [str(ACCMOND), "--no-udev", "--socket", path, "--state-dir", os.path.join(short_dir, "state"),
         "--manifest", manifest, "--manifest-dir", os.path.join(short_dir, "none")],  # fmt: skip
        stderr=subprocess.DEVNULL,
    )
    try:
        client = accmon.Client(path)
        for _ in range(1000):
            try:
                client.status()
                break
            except accmon.DaemonUnreachable:
                threading.Event().wait(0.01)
        with pytest.raises(accmon.ProtocolError) as caught:
            client.simulate_connect("usb")
        assert caught.value.code == "simulation-disabled"
        client.close()
    finally:
        daemon.terminate()
        daemon.wait(10)


def test_a_daemon_killed_mid_wait_is_connection_closed(accmond: SimulatedDaemon) -> None:
    killer = threading.Timer(0.3, accmond.kill)
    killer.start()
    with pytest.raises(accmon.ConnectionClosed) as caught:
        accmon.Client().wait_for(kind="serial", timeout=10)
    killer.join()
    assert type(caught.value) is accmon.ConnectionClosed
    assert str(caught.value) == "accmon: accmond closed the connection"


def test_a_daemon_stopping_mid_events_is_daemon_stopped(accmond: SimulatedDaemon) -> None:
    events = accmon.Client().events()
    stopper = threading.Timer(0.3, accmond.stop)
    stopper.start()
    with pytest.raises(accmon.DaemonStopped) as caught:
        next(events)
    stopper.join()
    assert (caught.value.code, caught.value.reason) == ("daemon-stopped", "the daemon is shutting down")


def test_a_peer_that_does_not_speak_the_protocol_is_an_invalid_response(short_dir: str) -> None:
    path = os.path.join(short_dir, "fake.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()

    def answer() -> None:
        peer, _ = server.accept()
        peer.recv(4096)
        peer.sendall(b"HTTP/1.0 400 Bad Request\n")
        peer.close()

    thread = threading.Thread(target=answer)
    thread.start()
    with pytest.raises(accmon.ProtocolError) as caught:
        accmon.Client(path).status()
    thread.join()
    server.close()
    assert caught.value.code == "invalid-response"
    assert str(caught.value).startswith("accmon: reply: accmond sent a line that is not JSON")


def test_a_daemon_that_does_not_answer_in_time_is_connection_closed(accmond: SimulatedDaemon) -> None:
    assert accmond.pid is not None
    os.kill(accmond.pid, signal.SIGSTOP)  # the kernel still accepts the connection; nothing answers
    try:
        started = time.monotonic()
        with pytest.raises(accmon.ConnectionClosed) as caught:
            accmon.Client(timeout=0.3).list()
        assert 0.3 <= time.monotonic() - started < 3
    finally:
        os.kill(accmond.pid, signal.SIGCONT)
    assert str(caught.value) == "accmon: hello: no reply from accmond within 0.3 s"
