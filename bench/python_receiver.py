#!/usr/bin/python3
"""A receiver for bench/python_client.py: an app that gets accmond's events through the Python client.

Usage: python_receiver.py MODE SOCKET COUNT

MODE is `async` (accmon.connect, subscribe, `async for`), `blocking` (accmon.Client().subscribe, a for loop) or
`session` (accmon.Session, `async for` over events(), which acknowledges each event as the next is asked for). It
prints `ready` once subscribed, then takes COUNT events, noting for each the CLOCK_MONOTONIC time (ns) at which the
loop body got it, and prints `done`. When a line arrives on its standard input (the bench has read its CPU time
meanwhile), it prints one line per event, `<ns> <serial number>`, and exits. The clients/python package must be
importable (PYTHONPATH).
"""
import asyncio
import sys
import time

import accmon


def report(stamps, serials):
    print("done", flush=True)
    sys.stdin.readline()
    sys.stdout.write("".join(f"{stamp} {serial}\n" for stamp, serial in zip(stamps, serials)))
    sys.stdout.flush()


async def run_async(socket, count, session):
    stamps, serials = [], []
    now = time.monotonic_ns
    if session:
        async with accmon.Session("bench", client_name="bench", socket=socket) as open_session:
            print("ready", flush=True)
            async for event in open_session.events():
                stamps.append(now())
                serials.append(event.accessory.serial_number)
                if len(stamps) == count:
                    break
            await open_session.forget()
    else:
        async with accmon.connect(socket, "bench") as connection:
            subscription = await connection.subscribe()
            print("ready", flush=True)
            async for event in subscription:
                stamps.append(now())
                serials.append(event.accessory.serial_number)
                if len(stamps) == count:
                    break
    report(stamps, serials)


def run_blocking(socket, count):
    stamps, serials = [], []
    now = time.monotonic_ns
    with accmon.Client(socket, "bench").subscribe() as subscription:
        print("ready", flush=True)
        for event in subscription:
            stamps.append(now())
            serials.append(event.accessory.serial_number)
            if len(stamps) == count:
                break
    report(stamps, serials)


def main():
    mode, socket, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "blocking":
        run_blocking(socket, count)
    elif mode in ("async", "session"):
        asyncio.run(run_async(socket, count, mode == "session"))
    else:
        raise SystemExit(f"python_receiver: unknown mode '{mode}' (async, blocking or session)")


if __name__ == "__main__":
    main()
