"""A Session in a process of its own, for the crash trials (test_session_crash.py).

Usage: session_child.py SOCKET RESTORE_ID RECORD_FILE

Appends one JSON line per write(2) to RECORD_FILE, so that each line is whole whenever the process is killed:
``{"start": pid, "restored": bool, "accessories": [ids]}`` once started, then ``{"change", "id", "seq"}`` for each
event as it consumes it, and ``{"state", "attempt"}`` for each change of the link.
"""

import asyncio
import json
import os
import sys
from typing import Any, Dict

import accmon


def record(descriptor: int, value: Dict[str, Any]) -> None:
    os.write(descriptor, (json.dumps(value) + "\n").encode())


async def main(socket: str, restore_id: str, path: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def on_state(state: accmon.ConnectionState) -> None:
        record(descriptor, {"state": state.state, "attempt": state.attempt})

    async with accmon.Session(restore_id, client_name="trial", socket=socket, on_state=on_state) as session:
        accessories = [accessory.connection_id for accessory in session.accessories]
        record(descriptor, {"start": os.getpid(), "restored": session.restored, "accessories": accessories})
        async for event in session.events():
            record(descriptor, {"change": event.change, "id": event.accessory.connection_id, "seq": event.seq})


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
