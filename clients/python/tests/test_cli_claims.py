"""``python3 -m accmon`` and claims, side by side with the Swift ``accmon`` on the same daemon: ``list`` and ``watch``
show the holder, ``status`` counts claims, and ``claims`` and ``release`` print and exit as the Swift command does."""

from __future__ import annotations

import json
import signal
import sys
from typing import List

import pytest

import accmon
from accmon.simulator import SimulatedDaemon
from conftest import ACCMON, eventually, require_root
from test_cli import plug_examples, python_cli, read_lines, start_watch, swift_cli


@pytest.mark.parametrize("arguments", [["list"], ["list", "--json"], ["list", "--all"], ["claims"], ["claims", "--json"]])
def test_claims_are_shown_as_the_swift_command_shows_them(accmond: SimulatedDaemon, arguments: List[str]) -> None:
    require_root("a holder and a waiter of other users")
    plug_examples(accmond)
    held = [accmond.take(1, as_user="nobody", reason="nightly flash"), accmond.take(3, reason="two words")]
    waiter = accmond.take(1, as_user="daemon", wait=True, reason="after you")
    eventually(lambda: all(claim.holder.user for claim in accmond.claims().claims), what="the holders' names")
    python, swift = python_cli(accmond, *arguments), swift_cli(accmond, *arguments)
    assert (python.returncode, python.stderr) == (0, "")
    assert python.stdout == swift.stdout
    assert "nobody" in python.stdout
    for claim in [*held, waiter]:
        claim.release()


def test_no_claims_and_the_status_line(accmond: SimulatedDaemon) -> None:
    plug_examples(accmond)
    assert python_cli(accmond, "claims").stdout == swift_cli(accmond, "claims").stdout == "no claims\n"
    with accmon.Client() as client, client.claim(1), client.claim(2), client.claim(3):
        python = [line for line in python_cli(accmond, "status").stdout.splitlines() if line.startswith("claims:")]
        swift = [line for line in swift_cli(accmond, "status").stdout.splitlines() if line.startswith("claims:")]
        assert python == swift == ["claims:       3 held, 0 waiting"]


@pytest.mark.parametrize("json_output", [True, False])
def test_watch_shows_claims_as_the_swift_command(accmond: SimulatedDaemon, json_output: bool) -> None:
    plug_examples(accmond)
    held = accmond.take(1, reason="before")
    # accmond resolves the holder's user name off its loop and then tells subscribers again: wait for it first.
    eventually(lambda: all(claim.holder.user for claim in accmond.claims().claims), what="the holder's name")
    flags = ["--json"] if json_output else []
    python = start_watch([sys.executable, "-m", "accmon", "--socket", accmond.socket, "watch", *flags])
    swift = start_watch([str(ACCMON), "--socket", accmond.socket, "watch", *flags])
    eventually(lambda: sum(client["subscribed"] for client in accmond.client().status().clients) == 2,
               what="both watches to subscribe")  # fmt: skip
    held.release()
    with accmon.Client() as client, client.claim(2, reason="a reason"):
        pass
    count = 4 if json_output else 6  # the snapshot (one line, or one per accessory), then four claim updates
    python_lines, swift_lines = read_lines(python, count), read_lines(swift, count)
    for process in (python, swift):
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    if not json_output:
        python_lines = [line[24:] for line in python_lines]
        swift_lines = [line[24:] for line in swift_lines]
        assert python_lines[0].endswith(f"claimed by {held.holder.name} since " + python_lines[0][-9:])
        assert "released    conn=1  serial:0403:6001:serial=A50285BI:if=00" in python_lines[3]
    else:
        assert json.loads(python_lines[0])["accessories"][0]["claim"]["claimID"] == held.claim_id
    assert python_lines == swift_lines


def test_release_exits_as_the_swift_command(accmond: SimulatedDaemon) -> None:
    plug_examples(accmond)
    for arguments in (["release", "1"], ["release", "c-7"], ["release", "usb:-:-"]):
        python, swift = python_cli(accmond, *arguments), swift_cli(accmond, *arguments)
        assert (python.returncode, python.stdout, python.stderr) == (swift.returncode, swift.stdout, swift.stderr)
        assert python.returncode == 1 and "no such claim" in python.stderr
    held = accmond.take(1)
    done = python_cli(accmond, "release", "1", "--force", "--reason", "needed")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    ended = held.wait_ended(10)
    assert ended is not None and (ended.kind, ended.reason) == ("broken", "needed")
    usage = python_cli(accmond, "release", "1", "--reason", "why")
    assert usage.returncode == 64 and "--reason goes with --force" in usage.stderr
    assert python_cli(accmond, "release").returncode == 64
