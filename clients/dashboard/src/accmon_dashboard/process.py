"""Running ``accmon``: a long-lived reader whose standard output is NDJSON, and short commands whose output is read
whole. The dashboard speaks neither MQTT nor accmond's protocol itself; ``accmon`` does.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import sys
from typing import Any, Callable, List, Optional, Sequence, Tuple

__all__ = ["AccmonNotFound", "MAX_LINE", "find_accmon", "read_lines", "run_command", "stop_task"]

#: The longest line read from a reader (a fleet line of 50 hosts of 100 accessories is about 3 MB).
MAX_LINE = 256 << 20
#: Bytes asked for in one read of the reader's output.
READ_SIZE = 1 << 16
#: The most bytes read in one go, while the reads fill the buffer.
CONTINUED_READ = 4 << 20
_PR_SET_PDEATHSIG = 1


class AccmonNotFound(Exception):
    """No ``accmon`` command where it was looked for."""


def find_accmon(explicit: Optional[str], program: str = sys.argv[0]) -> str:
    """The ``accmon`` to run: `explicit` (``--accmon PATH``), else the one next to this program (`program`, its
    path as started, then with symbolic links resolved), else ``accmon`` on ``PATH``.

    :raises AccmonNotFound: saying what was tried.
    """
    if explicit is not None:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return os.path.abspath(explicit)
        raise AccmonNotFound(f"--accmon: '{explicit}' is not an executable file")
    tried = []
    for directory in (os.path.dirname(os.path.abspath(program)), os.path.dirname(os.path.realpath(program))):
        candidate = os.path.join(directory, "accmon")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        tried.append(candidate)
    on_path = shutil.which("accmon")
    if on_path is not None:
        return on_path
    raise AccmonNotFound(
        f"no accmon command: not at {' or '.join(dict.fromkeys(tried))}, not on PATH; install the accmon package or "
        "name it with --accmon PATH"
    )


def _die_with_parent() -> None:
    """In the child, before exec: ends it (SIGTERM) when the dashboard dies, even by SIGKILL, so that no reader is
    left connected to the broker."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


async def run_command(command: Sequence[str], timeout: float = 30) -> Tuple[int, bytes, str]:
    """Runs a short command; returns its exit status, standard output and standard error (status -1 when it did not
    finish within `timeout` seconds and was killed)."""
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, preexec_fn=_die_with_parent,
    )  # fmt: skip
    try:
        output, errors = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return -1, b"", f"{command[0]}: no answer within {timeout:g} s"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output, errors.decode("utf-8", "replace")


async def read_lines(
    command: Sequence[str],
    on_batch: Callable[[List[Any]], None],
    on_message: Callable[[str], None],
) -> Tuple[int, str]:
    """Runs a reader until it exits: each read of its standard output that completes lines is handed to `on_batch`
    as one batch of decoded JSON values (``None`` for a line that is not JSON), each line of its standard error to
    `on_message`. Returns its exit status and its last line of standard error. Cancelled, it stops the reader.
    """
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, preexec_fn=_die_with_parent,
    )  # fmt: skip
    last_message = [""]

    async def messages() -> None:
        assert process.stderr is not None
        while True:
            try:
                line = await process.stderr.readline()
            except ValueError:  # a line over the stream's limit (64 KiB): dropped
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                last_message[0] = text
                on_message(text)

    errors = asyncio.ensure_future(messages())
    try:
        await _read_batches(process, on_batch)
        status = await process.wait()
        await asyncio.wait_for(errors, 5)
        return status, last_message[0]
    finally:
        errors.cancel()
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()


async def _read_batches(process: "asyncio.subprocess.Process", on_batch: Callable[[List[Any]], None]) -> None:
    assert process.stdout is not None
    pending: List[bytes] = []
    pending_size = 0
    while True:
        chunk = await process.stdout.read(READ_SIZE)
        if not chunk:
            return
        # A read that filled the buffer may have cut what the reader wrote at once (the lines of one change, such
        # as a claim's disconnect and connect pair, belong in one batch): what follows at once joins it, up to
        # CONTINUED_READ bytes, so that a flood still comes in batches.
        parts, last = [chunk], chunk
        while len(last) == READ_SIZE and len(parts) * READ_SIZE < CONTINUED_READ:
            try:
                last = await asyncio.wait_for(process.stdout.read(READ_SIZE), 0.01)
            except asyncio.TimeoutError:  # nothing more was written with it
                break
            parts.append(last)
        chunk = b"".join(parts)
        if b"\n" not in chunk:
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size > MAX_LINE:
                process.terminate()
                raise ValueError(f"a line of the reader is longer than {MAX_LINE} bytes")
            continue
        head, _, tail = chunk.rpartition(b"\n")
        data = b"".join(pending) + head
        pending = [tail] if tail else []
        pending_size = len(tail)
        batch: List[Any] = []
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    batch.append(json.loads(line))
                except ValueError:
                    batch.append(None)
        on_batch(batch)


async def stop_task(task: "asyncio.Future[Any]", every: float = 0.5) -> None:
    """Cancels `task` and waits for it to end, cancelling it again every `every` seconds while it runs on.

    One cancellation is not enough: before Python 3.12, ``asyncio.wait_for`` swallows a cancellation that comes as
    the awaited read completes (gh-86296), and a reader task that lost its cancellation that way read on for good,
    so that the dashboard never exited on SIGTERM. Whatever `task` raised is not raised here.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=every)
    if not task.cancelled():
        task.exception()  # retrieved, so that asyncio does not report it as never retrieved

