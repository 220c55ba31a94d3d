#!/usr/bin/python3
"""A file system that passes everything through to a directory, and stalls or fails writes on demand: a disk that
stops answering, or that answers with EIO, for the tests of what accmond does then (Tests/AccmonIntegrationTests).

Usage: faultfs.py BACKING MOUNTPOINT CONTROL

Mounts BACKING at MOUNTPOINT (FUSE, through python3-fusepy; root mounts without fusermount) and serves in the
foreground until SIGTERM. While the file CONTROL/stall exists, every operation that writes (create, write, fsync,
rename, unlink, truncate, chmod, mkdir) waits until it is removed; while CONTROL/fail exists, they fail with EIO.
Reads always pass: only the writing side of the disk is faulty.
"""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class FaultFS(Operations):
    def __init__(self, backing, control):
        self.backing = backing
        self.control = control

    def _path(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def _writing(self):
        while os.path.exists(os.path.join(self.control, "stall")):
            time.sleep(0.01)
        if os.path.exists(os.path.join(self.control, "fail")):
            raise FuseOSError(errno.EIO)

    # Reading
    def getattr(self, path, fh=None):
        st = os.lstat(self._path(path))
        return {key: getattr(st, key) for key in (
            "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime", "st_ctime")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def readlink(self, path):
        return os.readlink(self._path(path))

    def statfs(self, path):
        st = os.statvfs(self._path(path))
        return {key: getattr(st, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize",
            "f_namemax")}

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            self._writing()
        return os.open(self._path(path), flags & ~os.O_NONBLOCK)

    def read(self, path, size, offset, fh):
        os.lseek(fh, offset, os.SEEK_SET)
        return os.read(fh, size)

    def release(self, path, fh):
        os.close(fh)

    def flush(self, path, fh):
        return 0

    # Writing
    def create(self, path, mode, fi=None):
        self._writing()
        return os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def write(self, path, data, offset, fh):
        self._writing()
        os.lseek(fh, offset, os.SEEK_SET)
        return os.write(fh, data)

    def fsync(self, path, datasync, fh):
        self._writing()
        os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        self._writing()
        return 0

    def truncate(self, path, length, fh=None):
        self._writing()
        os.truncate(self._path(path), length)

    def rename(self, old, new):
        self._writing()
        os.rename(self._path(old), self._path(new))

    def unlink(self, path):
        self._writing()
        os.unlink(self._path(path))

    def mkdir(self, path, mode):
        self._writing()
        os.mkdir(self._path(path), mode)

    def chmod(self, path, mode):
        self._writing()
        os.chmod(self._path(path), mode)

    def utimens(self, path, times=None):
        return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    backing, mountpoint, control = sys.argv[1:]
    FUSE(FaultFS(os.path.abspath(backing), os.path.abspath(control)), mountpoint, foreground=True)
