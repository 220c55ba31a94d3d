"""What every module of the umockdev harness (testbed.py) shares: where the base topology lives, the `sync` sentinel's
path, the harness's log line, and the error every command failure is reported as."""

import os
import sys

PCI = "pci0000:00/0000:00:14.0"
# A USB device accmond rejects (its idVendor is not hex) with a notice naming its path: the `sync` sentinel.
SENTINEL = f"/sys/devices/{PCI}/usb2/2-15"


def log(message):
    sys.stderr.write(f"testbed[{os.getpid()}]: {message}\n")
    sys.stderr.flush()


class HarnessError(Exception):
    pass
