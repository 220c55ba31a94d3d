#!/usr/bin/python3
"""A file system with two files that a scan of /proc must not trust or wait on (Tests/AccmonNodesTests).

Usage: stallfs.py MOUNTPOINT CONTROL MAJOR:MINOR

Mounts at MOUNTPOINT (FUSE through python3-fusepy, attributes never cached) and serves in the foreground until
SIGTERM:
- `fake` says it is a character device with the device number MAJOR:MINOR (a user's FUSE mount can claim any);
- `stall` is a regular file whose attributes are not answered while the file CONTROL/stall exists (a file system
  that stopped answering: a hard NFS mount whose server is gone).
"""
import errno
import os
import stat
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class StallFS(Operations):
    def __init__(self, control, device):
        self.control = control
        major, minor = (int(part) for part in device.split(":"))
        self.device = os.makedev(major, minor)

    def getattr(self, path, fh=None):
        now = time.time()
        common = {"st_uid": 0, "st_gid": 0, "st_atime": now, "st_mtime": now, "st_ctime": now, "st_nlink": 1}
        if path == "/":
            return dict(common, st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/fake":
            return dict(common, st_mode=stat.S_IFCHR | 0o666, st_rdev=self.device)
        if path == "/stall":
            while os.path.exists(os.path.join(self.control, "stall")):
                time.sleep(0.01)
            return dict(common, st_mode=stat.S_IFREG | 0o644, st_size=0)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "fake", "stall"]

    def open(self, path, flags):
        return 0


def main():
    mountpoint, control, device = sys.argv[1:4]
    FUSE(StallFS(control, device), mountpoint, foreground=True, nothreads=False, allow_other=True,
         attr_timeout=0, entry_timeout=0, dev=True)


if __name__ == "__main__":
    main()
