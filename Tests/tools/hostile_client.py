#!/usr/bin/env python3
"""A client of accmond that misbehaves on purpose, for the hostile-client tests, the soak and the bench.

Usage: hostile_client.py SOCKET MODE [ARGS] [--hold]

Modes (each prints one JSON line with what it saw, then exits; with --hold it keeps its connections open and waits
for SIGTERM after printing):
  open N                  N connections, each says hello; counts the hellos answered and the refusals
                          (too-many-connections), with the first refusal's message
  status N                N connections, each says hello then asks status; the largest number of sessions one
                          reply lists, and its unlistedClients
  pipeline N REQUESTS [TYPE]
                          N connections, each writes REQUESTS requests of TYPE (default status) as fast as the socket
                          takes them and never reads; then counts the connections the daemon closed
  restore ID...           for each restore id: connect, hello with it, subscribe, close (a preserved session)
  fairness REQUESTS       one connection floods REQUESTS list requests (a writer thread, its replies read as they
                          come); once its first reply is in, a second connection asks status: how many flood
                          replies had arrived when the status reply did
  churn SECONDS           opens and closes connections as fast as it can for SECONDS; counts them
  all SECONDS             all of the above at once for SECONDS, with malformed lines too (the soak)
Run it as another user with setpriv(1). Standard library only.
"""
import json
import os
import signal
import socket
import sys
import threading
import time


def connect(path, receive_buffer=None):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if receive_buffer:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.connect(path)
    return client


def read_line(client, buffer, timeout=10.0):
    """The next line from client (buffer: bytearray of what was read after earlier lines); None at EOF/timeout."""
    client.settimeout(timeout)
    while b"\n" not in buffer:
        try:
            chunk = client.recv(65536)
        except (socket.timeout, OSError):
            return None
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return json.loads(line)


def hello(client, buffer, restore_id=None):
    request = {"type": "hello", "versions": [1], "client": "hostile"}
    if restore_id is not None:
        request["restoreID"] = restore_id
    try:
        client.sendall((json.dumps(request) + "\n").encode())
    except OSError:
        pass  # refused: the daemon's error may already be in the receive buffer
    return read_line(client, buffer)


def mode_open(path, count, receive_buffer=None):
    kept, refused, messages, other = [], 0, [], 0
    for _ in range(count):
        try:
            client = connect(path, receive_buffer)
        except OSError as error:
            other += 1
            messages.append(f"connect: {error}")
            continue
        buffer = bytearray()
        try:
            reply = hello(client, buffer)
        except OSError:
            reply = None
        if reply and reply.get("type") == "hello":
            kept.append(client)
        elif reply and reply.get("code") == "too-many-connections":
            refused += 1
            if len(messages) < 3:
                messages.append(reply.get("message", ""))
            client.close()
        else:
            other += 1
            client.close()
    return {"accepted": len(kept), "refused": refused, "other": other, "messages": messages}, kept


def mode_status(path, count):
    result, kept = mode_open(path, count)
    largest, unlisted, manifest_seen, accessories, sessions = 0, 0, False, -1, -1
    for client in kept:
        buffer = bytearray()
        client.sendall(b'{"type":"status"}\n')
        reply = read_line(client, buffer)
        if reply and reply.get("type") == "status":
            largest = max(largest, len(reply.get("clients", [])))
            unlisted = max(unlisted, reply.get("unlistedClients", 0))
            manifest_seen = manifest_seen or "manifest" in reply
            accessories = max(accessories, reply.get("connectedAccessories", -1))
            sessions = max(sessions, reply.get("sessions", -1))
    result.update({"listed": largest, "unlisted": unlisted, "manifestSeen": manifest_seen,
                   "connectedAccessories": accessories, "sessions": sessions})
    return result, kept


def mode_pipeline(path, count, requests, kind="status"):
    # A small receive buffer: what the daemon cannot send waits in its own buffers, where the limits apply.
    result, kept = mode_open(path, count, receive_buffer=4096)
    line = json.dumps({"type": kind}).encode() + b"\n"
    written = 0
    for client in kept:
        client.setblocking(False)
        data = line * requests
        while data:
            try:
                sent = client.send(data)
            except BlockingIOError:
                break
            except OSError:
                break
            written += sent
            data = data[sent:]
    time.sleep(1.0)
    closed = 0
    for client in kept:
        try:
            client.send(b"\n")  # a keep-alive: fails once the daemon closed the connection
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    result.update({"bytesWritten": written, "closedByDaemon": closed})
    return result, kept


def mode_restore(path, ids):
    kept = 0
    for restore_id in ids:
        client = connect(path)
        buffer = bytearray()
        reply = hello(client, buffer, restore_id)
        if reply and reply.get("type") == "hello":
            client.sendall(b'{"type":"subscribe"}\n')
            if (read_line(client, buffer) or {}).get("type") == "snapshot":
                kept += 1
        client.close()
        time.sleep(0.01)  # the daemon keeps sessions by when they went away: keep that order
    return {"preserved": kept}, []


def mode_fairness(path, requests):
    flooder = connect(path)
    replies = [0]
    first = threading.Event()
    done = threading.Event()

    def write():
        flooder.sendall(b'{"type":"list"}\n' * requests)

    def read():
        buffer = bytearray()
        while replies[0] < requests:
            if read_line(flooder, buffer, timeout=60) is None:
                break
            replies[0] += 1
            first.set()
        done.set()

    threading.Thread(target=write, daemon=True).start()
    threading.Thread(target=read, daemon=True).start()
    first.wait(30)
    victim = connect(path)
    victim.sendall(b'{"type":"status"}\n')
    reply = read_line(victim, bytearray(), timeout=60)
    at_reply = replies[0]
    done.wait(120)
    return {"floodRepliesBeforeVictim": at_reply, "floodReplies": replies[0], "requests": requests,
            "victimAnswered": bool(reply and reply.get("type") == "status")}, []


def mode_churn(path, seconds):
    deadline, count, refused = time.monotonic() + seconds, 0, 0
    while time.monotonic() < deadline:
        try:
            client = connect(path)
            count += 1
            client.close()
        except OSError:
            refused += 1
    return {"connections": count, "failed": refused}, []


def mode_all(path, seconds):
    """Every misbehaviour above at once, for SECONDS: connections held up to and past the limit, pipelined requests
    never read, a request flood that reads, status asked over and over, restore ids created and abandoned (some too
    long), connections opened and closed, and malformed lines."""
    deadline = time.monotonic() + seconds
    counts = {"held": 0, "refused": 0, "flood": 0, "status": 0, "restore": 0, "churn": 0, "malformed": 0,
              "errors": 0}
    lock = threading.Lock()

    def count(key, n=1):
        with lock:
            counts[key] += n

    held = []

    def hold_and_pipeline():
        for index in range(120):
            try:
                client = connect(path, receive_buffer=4096)
            except OSError:
                count("refused")
                continue
            buffer = bytearray()
            reply = hello(client, buffer)
            if not reply or reply.get("type") != "hello":
                count("refused")
                client.close()
                continue
            count("held")
            held.append(client)
            if index % 2 == 0:  # half of them pipeline status requests and never read
                client.setblocking(False)
                try:
                    client.send(b'{"type":"status"}\n' * 2000)
                except OSError:
                    pass

    def flood():
        try:
            client = connect(path)
        except OSError:
            return
        client.settimeout(5)
        while time.monotonic() < deadline:
            try:
                client.sendall(b'{"type":"list"}\n' * 200)
                received = 0
                buffer = bytearray()
                while received < 200 and read_line(client, buffer, timeout=5) is not None:
                    received += 1
                count("flood", received)
            except OSError:
                count("errors")
                return

    def status():
        while time.monotonic() < deadline:
            try:
                client = connect(path)
                client.sendall(b'{"type":"status"}\n')
                if read_line(client, bytearray(), timeout=5):
                    count("status")
                client.close()
            except OSError:
                count("errors")
                time.sleep(0.01)

    def restore():
        index = 0
        while time.monotonic() < deadline:
            index += 1
            restore_id = ("x" * 300) if index % 10 == 0 else f"hostile-{index}"
            try:
                client = connect(path)
                buffer = bytearray()
                if (hello(client, buffer, restore_id) or {}).get("type") == "hello":
                    client.sendall(b'{"type":"subscribe"}\n')
                    read_line(client, buffer, timeout=5)
                    count("restore")
                client.close()
            except OSError:
                count("errors")
                time.sleep(0.01)

    def churn_and_garbage():
        garbage = [b"{\n", b"[1,2]\n", b'{"type":"status","id":1e-999999}\n', b'{"type":"list","type":"list"}\n',
                   b"x" * 70000 + b"\n", b'{"type":"hello","versions":[1],"client":' + b'"a"' * 10 + b"}\n"]
        index = 0
        while time.monotonic() < deadline:
            index += 1
            try:
                client = connect(path)
                client.sendall(garbage[index % len(garbage)])
                count("malformed")
                client.close()
                count("churn")
            except OSError:
                count("errors")
                time.sleep(0.01)

    threads = [threading.Thread(target=f, daemon=True) for f in (hold_and_pipeline, flood, status, restore,
                                                                 churn_and_garbage)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 30)
    for client in held:
        client.close()
    return counts, []


def main():
    arguments = [a for a in sys.argv[1:] if a != "--hold"]
    hold = "--hold" in sys.argv
    if len(arguments) < 2:
        sys.exit(__doc__)
    path, mode, rest = arguments[0], arguments[1], arguments[2:]
    if mode == "open":
        result, kept = mode_open(path, int(rest[0]))
    elif mode == "status":
        result, kept = mode_status(path, int(rest[0]))
    elif mode == "pipeline":
        result, kept = mode_pipeline(path, int(rest[0]), int(rest[1]), *rest[2:3])
    elif mode == "restore":
        result, kept = mode_restore(path, rest)
    elif mode == "fairness":
        result, kept = mode_fairness(path, int(rest[0]))
    elif mode == "churn":
        result, kept = mode_churn(path, float(rest[0]))
    elif mode == "all":
        result, kept = mode_all(path, float(rest[0]))
    else:
        sys.exit(f"hostile_client: unknown mode '{mode}'\n{__doc__}")
    result["uid"] = os.getuid()
    print(json.dumps(result), flush=True)
    if hold:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            signal.pause()
    del kept


if __name__ == "__main__":
    main()
