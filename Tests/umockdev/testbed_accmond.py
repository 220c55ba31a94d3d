"""accmond inside the testbed: started and stopped by the harness, its stderr collected (to the harness's stderr or a
log file, and in memory for the `log` command), and `sync`: a `change` uevent for the sentinel device, acknowledged
once accmond logs its notice about it, which tells that accmond has read every uevent sent before."""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

from testbed_common import SENTINEL, HarnessError, log


class Accmond:
    """accmond as a child process: `path` with `args`, its stderr read by a thread into `lines`."""

    def __init__(self, path, args, log_file):
        self.path = path
        self.args = list(args)
        self.log_file = open(log_file, "a", buffering=1, encoding="utf-8", errors="replace") if log_file else None
        self.process = None
        self.process_reported = False
        self.lines = []
        self.cond = threading.Condition()
        self.sentinel_seen = 0
        self.sentinel_sent = 0
        self.reader = None

    @property
    def socket(self):
        if "--socket" in self.args:
            return self.args[self.args.index("--socket") + 1]
        return None

    @property
    def logs_notices(self):
        if "--log-level" not in self.args:
            return True
        return self.args[self.args.index("--log-level") + 1] in ("trace", "debug", "info", "notice")

    def running(self):
        return self.process is not None and self.process.poll() is None

    def start(self, extra=None, timeout=10.0):
        if self.running():
            raise HarnessError("accmond is already running")
        args = [self.path] + self.args + list(extra or [])
        with self.cond:
            start_index = len(self.lines)
        log(f"starting {' '.join(args)}")

        def die_with_parent():
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

        with self.cond:
            self.sentinel_seen = self.sentinel_sent = 0
        self.process_reported = False
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=subprocess.PIPE,
                                        preexec_fn=die_with_parent)
        self.reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if any("listening on" in line for line in self.lines[start_index:]):
                    break
                if self.process.poll() is not None and not self.reader.is_alive():
                    raise HarnessError(f"accmond exited with {self.process.returncode} before listening; log:\n"
                                       + "\n".join(self.lines[start_index:][-30:]))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise HarnessError(f"accmond did not log 'listening on' within {timeout} s; log:\n"
                                       + "\n".join(self.lines[start_index:][-30:]))
                self.cond.wait(min(remaining, 0.1))
        return {"pid": self.process.pid, "socket": self.socket}

    def _read(self, process):
        """Collects accmond's stderr: in chunks, not line by line, so that a chatty log costs this process little."""
        fd = process.stderr.fileno()
        marker = f"udev: change: {SENTINEL}: skipped"
        pending = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            if not complete:
                continue
            lines = [raw.decode("utf-8", errors="replace") for raw in complete]
            text = "\n".join(lines) + "\n"
            if self.log_file:
                self.log_file.write(text)
            else:
                sys.stderr.write("".join(f"accmond| {line}\n" for line in lines))
            with self.cond:
                self.lines += lines
                self.sentinel_seen += text.count(marker)
                self.cond.notify_all()
        with self.cond:
            if pending:
                self.lines.append(pending.decode("utf-8", errors="replace"))
            self.cond.notify_all()

    def sync(self, world, timeout=10.0):
        if not self.running():
            raise HarnessError("sync: accmond is not running")
        if not self.logs_notices:
            raise HarnessError("sync: accmond must log notices (--log-level notice or lower): the harness watches "
                               "for its notice about the sentinel device")
        with self.cond:
            target = self.sentinel_sent + 1
            self.sentinel_sent = target
        world.tb.uevent(SENTINEL, "change")
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.sentinel_seen < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.running():
                    raise HarnessError(f"sync: accmond did not log the sentinel within {timeout} s "
                                       f"(running: {self.running()}); last lines:\n" + "\n".join(self.lines[-20:]))
                self.cond.wait(min(remaining, 0.1))

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.process is None:
            return {"exit": None}
        if self.process.returncode is not None and not self.process_reported:
            pass
        elif self.process.returncode is not None:
            code = self.process.returncode
            return {"exit": code} if code >= 0 else {"signal": -code}
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"accmond did not stop within {timeout} s of signal {sig}; killing it")
                self.process.kill()
                self.process.wait()
        if self.reader:
            self.reader.join(2)
        code = self.process.returncode
        self.process_reported = True
        log(f"accmond ended: {'exit ' + str(code) if code >= 0 else 'signal ' + str(-code)}")
        return {"exit": code} if code >= 0 else {"signal": -code}

    def exit_status(self):
        if self.process is None or self.process.returncode is None:
            return 0
        code = self.process.returncode
        return code if code >= 0 else 128 - code
