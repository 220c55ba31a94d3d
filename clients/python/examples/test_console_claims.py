# test_console_claims.py: an app's tests of what it does when its accessory is taken from it.
# Run: pytest -p accmon.testing test_console_claims.py
import os
import pwd
import threading
import time
from typing import List, Tuple

import pytest

import accmon
from accmon.simulator import SimulatedDaemon


def serial_console(log: List[str], ready: threading.Event) -> str:
    """The code under test: checks the board's serial adapter out and keeps it until the claim ends, logging who asks
    for it and where it is after a reset. Returns why it stopped."""
    with accmon.Client(client_name="console") as client:
        try:
            claim = client.claim(kind="serial", vendor="0403", reason="serial console")
        except accmon.ClaimConflict as busy:
            return "busy: held by " + ", ".join(holder.holder.name for holder in busy.holders)
        with claim:
            log.append(f"console on {claim.device_node}")
            ready.set()
            for notice in claim:  # until the claim ends
                if notice.kind == "contention" and notice.by is not None:
                    log.append(f"{notice.by.name} asked for it: {notice.reason}")
                elif notice.kind == "returned":
                    log.append(f"back as connection {claim.accessories[0].connection_id} on {claim.device_node}")
            ended = claim.ended
            assert ended is not None
            return f"{ended.kind} by {ended.by.name if ended.by else 'accmond'}: {ended.reason}"


def start_console(log: List[str]) -> Tuple[threading.Thread, List[str]]:
    ready = threading.Event()
    result: List[str] = []
    thread = threading.Thread(target=lambda: result.append(serial_console(log, ready)))
    thread.start()
    assert ready.wait(10), "the console did not start"
    return thread, result


def plug_board(accmond: SimulatedDaemon) -> int:
    return accmond.plug(kind="serial", vendor="0403", product="6001", serial="BOARD1", port="1-1.4",
                        nodes=[accmond.make_node("ttyUSB0")])  # fmt: skip


def test_tells_who_asked_and_stops_when_the_claim_is_broken(accmond: SimulatedDaemon) -> None:
    board = plug_board(accmond)
    log: List[str] = []
    console, result = start_console(log)
    with pytest.raises(accmon.ClaimConflict):
        accmond.take(board, reason="firmware update")  # another process asks, and does not wait
    accmond.break_claim(board, reason="the bench is needed")  # an admin takes it
    console.join(10)
    me = pwd.getpwuid(os.getuid()).pw_name  # the test's user: who asked, and the admin
    assert log == [f"console on {accmond.nodes_dir}/ttyUSB0", f"{me} asked for it: firmware update"]
    assert result == [f"broken by {me}: the bench is needed"]


def test_follows_the_board_through_a_reset(accmond: SimulatedDaemon) -> None:
    board = plug_board(accmond)
    log: List[str] = []
    console, result = start_console(log)
    again = accmond.reenumerate(board)  # the board resets: a new connection of the same accessory
    deadline = time.monotonic() + 10
    while len(log) < 2 and time.monotonic() < deadline:  # until the console has found it again
        time.sleep(0.01)
    assert log[1:] == [f"back as connection {again} on {accmond.nodes_dir}/ttyUSB0"]
    accmond.break_claim(again)
    console.join(10)
    assert result[0].startswith("broken by ")


def test_says_who_holds_the_board(accmond: SimulatedDaemon) -> None:
    plug_board(accmond)
    holder = accmond.take(kind="serial", reason="flashing")  # held by another process
    assert serial_console([], threading.Event()) == f"busy: held by {holder.user.name}"
