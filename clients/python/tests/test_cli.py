"""``python3 -m accmon`` through real processes, side by side with the Swift ``accmon`` on the same daemon: the
same output for ``list``, ``status`` and ``watch``, and every exit status (0, 1, 64, 69, 75; 77 is in
test_errors.py, with another user)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import List

import pytest

import accmon
from accmon.simulator import SimulatedDaemon
from conftest import ACCMON, child_environment, eventually, run_python


def python_cli(daemon: SimulatedDaemon, *arguments: str) -> "subprocess.CompletedProcess[str]":
    return run_python(["-m", "accmon", "--socket", daemon.socket, *arguments])


def swift_cli(daemon: SimulatedDaemon, *arguments: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(ACCMON), "--socket", daemon.socket, *arguments], capture_output=True, text=True, timeout=30)


def plug_examples(daemon: SimulatedDaemon) -> None:
    daemon.plug(kind="serial", vendor="0403", product="6001", name="FT232R USB UART", serial="A50285BI",
                manufacturer="FTDI", nodes=["/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI"], port="1-1.2",
                interface="00", protocols=["com.ftdi.uart"])  # fmt: skip
    daemon.plug(kind="bluetooth-hid", name="Keys – “Tastatur” ⌘", serial="a4:c1:38:00:00:01")
    daemon.plug(kind="usb")


@pytest.mark.parametrize("arguments", [["list"], ["list", "--json"], ["list", "--all"], ["list", "--json", "--all"],
                                       ["list", "--kind", "serial", "--vendor", "403"]])  # fmt: skip
def test_list_prints_what_the_swift_command_prints(accmond: SimulatedDaemon, arguments: List[str]) -> None:
    plug_examples(accmond)
    python, swift = python_cli(accmond, *arguments), swift_cli(accmond, *arguments)
    assert (python.returncode, python.stderr) == (0, "")
    assert python.stdout == swift.stdout


def test_status_prints_what_the_swift_command_prints(accmond: SimulatedDaemon) -> None:
    plug_examples(accmond)
    python, swift = python_cli(accmond, "status"), swift_cli(accmond, "status")
    assert python.returncode == 0
    def head(text: str) -> List[str]:
        # The daemon's lines; the Swift command's recent history after them (accmond's `history`, issue 29) is not
        # in the Python client yet.
        lines = text.split("\nrecent history")[0].splitlines()
        return [line for line in lines if ":" in line and not line.startswith("uptime")][:6]

    assert head(python.stdout) == head(swift.stdout)
    assert "recent history (accmon history for more):" in swift.stdout
    assert "SESSION" in python.stdout and '"python3 -m accmon"' in python.stdout
    document = json.loads(python_cli(accmond, "status", "--json").stdout)
    assert document["version"] == 1 and document["socket"] == accmond.socket
    assert document["status"]["connectedAccessories"] == 3


def start_watch(command: List[str]) -> "subprocess.Popen[str]":
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_environment(NO_COLOR="1"))  # fmt: skip


def read_lines(process: "subprocess.Popen[str]", count: int) -> List[str]:
    assert process.stdout is not None
    lines: List[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout.readline() for _ in range(count)))  # type: ignore[union-attr]
    reader.start()
    reader.join(15)
    assert len(lines) == count, f"got {lines}"
    return lines


@pytest.mark.parametrize("json_output", [True, False])
def test_watch_prints_what_the_swift_command_prints(accmond: SimulatedDaemon, json_output: bool) -> None:
    plug_examples(accmond)
    flags = ["--json"] if json_output else []
    python = start_watch([sys.executable, "-m", "accmon", "--socket", accmond.socket, "watch", *flags])
    swift = start_watch([str(ACCMON), "--socket", accmond.socket, "watch", *flags])
    expected_subscribers = 3  # the two watches and the fixture's connection
    eventually(lambda: accmond.client().status().sessions == expected_subscribers and all(
        client["subscribed"] for client in accmond.client().status().clients if client["clientName"] != "accmon.testing"
    ), what="both watches to subscribe")  # fmt: skip
    added = accmond.plug(kind="usb", vendor="1209", product="0001", name="Stick", serial="X1")
    accmond.unplug(added)
    count = 3 if json_output else 5  # JSON: the snapshot is one line; text: one line per accessory present
    python_lines, swift_lines = read_lines(python, count), read_lines(swift, count)
    for process in (python, swift):
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    if not json_output:  # each line starts with the local time, to the millisecond
        python_lines = [line[24:] for line in python_lines]
        swift_lines = [line[24:] for line in swift_lines]
    assert python_lines == swift_lines
    assert python.stderr is not None and python.stderr.read() == ""


def test_watch_with_a_restore_id_prints_the_session_line_as_the_swift_command(accmond: SimulatedDaemon) -> None:
    plug_examples(accmond)
    lines = {}
    for name, command in (("python", [sys.executable, "-m", "accmon"]), ("swift", [str(ACCMON)])):
        watch = start_watch([*command, "--socket", accmond.socket, "watch", "--json", "--restore-id", name])
        lines[name] = read_lines(watch, 1)[0]
        watch.send_signal(signal.SIGINT)
        assert watch.wait(10) == 0
        if name == "python":  # (the Swift command reports the connection from a task of its own, maybe later)
            assert watch.stderr is not None and watch.stderr.read() == "accmon: connected to accmond\n"
    assert lines["python"] == lines["swift"]
    assert lines["python"].startswith('{"accessories":[{"accessoryID":"serial:0403:6001:serial=A50285BI:if=00"')
    assert lines["python"].endswith('],"restored":false,"type":"session"}\n')


def test_watch_ends_with_69_when_the_daemon_stops(accmond: SimulatedDaemon) -> None:
    watch = start_watch([sys.executable, "-m", "accmon", "--socket", accmond.socket, "watch"])
    eventually(lambda: any(c["subscribed"] for c in accmond.client().status().clients), what="the watch")
    accmond.stop()
    assert watch.wait(10) == 69
    assert watch.stderr is not None and watch.stderr.read() == "accmon: accmond stopped: the daemon is shutting down\n"


def test_wait_prints_the_device_node_and_exits_0(accmond: SimulatedDaemon) -> None:
    accmond.plug(kind="serial", vendor="0403", product="6001", serial="A1", nodes=["/dev/ttyUSB4", "/dev/serial/x"])
    done = python_cli(accmond, "wait", "--kind", "serial", "--vendor", "0403", "--timeout", "5")
    assert (done.returncode, done.stdout, done.stderr) == (0, "/dev/ttyUSB4\n", "")
    document = json.loads(python_cli(accmond, "wait", "--serial", "A1", "--json").stdout)
    assert document["version"] == 1
    assert accmon.Accessory.from_json(document["accessory"]).device_nodes == ("/dev/ttyUSB4", "/dev/serial/x")
    nodeless = accmond.plug(kind="usb", vendor="1209")
    done = python_cli(accmond, "wait", "--kind", "usb")
    assert (done.returncode, done.stdout) == (0, "")  # no device node to print
    assert nodeless == 2


def test_wait_for_one_that_arrives_later(accmond: SimulatedDaemon) -> None:
    timer = threading.Timer(0.5, lambda: accmond.plug(kind="serial", vendor="0403", nodes=["/dev/ttyACM0"]))
    timer.start()
    started = time.monotonic()
    done = python_cli(accmond, "wait", "--kind=serial", "--timeout=20")
    timer.join()
    assert (done.returncode, done.stdout) == (0, "/dev/ttyACM0\n")
    assert time.monotonic() - started >= 0.5


def test_wait_times_out_with_75(accmond: SimulatedDaemon) -> None:
    done = python_cli(accmond, "wait", "--kind", "serial", "--timeout", "0.3")
    assert (done.returncode, done.stdout) == (75, "")
    assert done.stderr == "accmon: wait: no accessory matching kind=serial connected within 0.3 s\n"


def test_an_unreachable_daemon_is_69(tmp_path: object) -> None:
    for command in (["list"], ["status"], ["wait", "--timeout", "1"], ["watch"]):
        done = run_python(["-m", "accmon", "--socket", "/nonexistent/accmon.sock", *command])
        assert done.returncode == 69, command
        assert done.stderr.startswith("accmon: cannot connect to '/nonexistent/accmon.sock': No such file or directory;")
    done = run_python(["-m", "accmon", "list"], ACCMON_SOCKET="/nonexistent/from-the-environment.sock")
    assert done.returncode == 69 and "'/nonexistent/from-the-environment.sock'" in done.stderr


@pytest.mark.parametrize(
    ("arguments", "message", "usage"),
    [
        ([], "a command is required", "python3 -m accmon"),
        (["frobnicate"], "unknown command 'frobnicate'", "python3 -m accmon"),
        (["list", "--bogus"], "unknown option '--bogus'", "python3 -m accmon list"),
        (["wait", "--kind", "hid"], "--kind: 'hid' is not a kind (usb, serial, bluetooth-hid)", "python3 -m accmon wait"),
        (["wait", "--vendor", "0x0403"], "--vendor: '0x0403' is not a hex id of 1 to 4 digits (such as 0403)",
         "python3 -m accmon wait"),  # fmt: skip
        (["wait", "--timeout", "soon"], "--timeout: 'soon' is not a number of seconds (such as 30 or 0.5)",
         "python3 -m accmon wait"),  # fmt: skip
        (["wait", "--timeout", "-1"], "--timeout: '-1' is not a number of seconds", "python3 -m accmon wait"),
        (["status", "--kind", "usb"], "unknown option '--kind'", "python3 -m accmon status"),
        (["watch", "--all", "--restore-id", "x"], "--all and --restore-id do not go together", "python3 -m accmon watch"),
        (["watch", "--restore-id"], "--restore-id needs a value", "python3 -m accmon watch"),
    ],
)
def test_usage_errors_are_64_before_connecting(arguments: List[str], message: str, usage: str) -> None:
    done = run_python(["-m", "accmon", "--socket", "/nonexistent/accmon.sock", *arguments])
    assert (done.returncode, done.stdout) == (64, "")
    assert done.stderr.startswith(f"Error: {message}")
    assert "Usage: python3 -m accmon" in done.stderr and done.stderr.endswith(f"See '{usage} --help'.\n")


def test_help_and_version_exit_0_on_stdout() -> None:
    for arguments in (["--help"], ["help"], ["help", "wait"], ["wait", "--help"], ["list", "--json", "-h"]):
        done = run_python(["-m", "accmon", *arguments])
        assert (done.returncode, done.stderr) == (0, "") and done.stdout.startswith("Usage: python3 -m accmon")
    assert "--timeout SECONDS" in run_python(["-m", "accmon", "help", "wait"]).stdout
    done = run_python(["-m", "accmon", "--version"])
    assert (done.returncode, done.stdout) == (0, f"accmon {accmon.__version__} (python)\n")


def test_a_refused_request_is_1(accmond: SimulatedDaemon) -> None:
    async_holder = start_watch([sys.executable, "-m", "accmon", "--socket", accmond.socket, "watch", "--restore-id", "held"])
    eventually(lambda: any(c["subscribed"] for c in accmond.client().status().clients), what="the first watch")
    second = python_cli(accmond, "watch", "--restore-id", "held")
    async_holder.send_signal(signal.SIGTERM)
    assert async_holder.wait(10) == 0
    assert second.returncode == 1
    assert re.match(r"hello: restoreID: 'held' is in use by another connection of this user\n$", second.stderr)


def test_ctrl_c_ends_watch_quietly_with_0(accmond: SimulatedDaemon) -> None:
    watch = start_watch([sys.executable, "-m", "accmon", "--socket", accmond.socket, "watch"])
    eventually(lambda: any(c["subscribed"] for c in accmond.client().status().clients), what="the watch")
    os.kill(watch.pid, signal.SIGINT)
    assert watch.wait(10) == 0
    assert watch.stderr is not None and watch.stderr.read() == ""
