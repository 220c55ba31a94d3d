"""The credentials a client must present when the dashboard listens beyond loopback (``--auth-file``).

The file holds one credential per line (empty lines and lines starting with ``#`` are skipped):

- ``NAME:PASSWORD``: HTTP basic credentials (a browser asks for them);
- a bare token (no ``:``): ``Authorization: Bearer TOKEN`` (Prometheus' ``authorization`` or ``bearer_token_file``,
  scripts), and also accepted as the password of any basic user name.

Every secret is at least :data:`MIN_SECRET` characters. The file must be a regular file (not a symbolic link), not
readable or writable by every user, not writable by its group: only root and the service should read it (under
systemd, ``LoadCredential=`` hands the service a copy only it may read; docs/DASHBOARD.md).
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import hmac
import os
import stat
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

__all__ = ["AuthFileProblem", "Credentials", "MAX_AUTH_FILE", "MIN_SECRET", "load_credentials"]

MIN_SECRET = 16
MAX_AUTH_FILE = 65536


class AuthFileProblem(Exception):
    """Why the credentials file was refused (without the path)."""


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


@dataclass
class Credentials:
    """The accepted credentials, kept as SHA-256 digests and compared in constant time."""

    tokens: List[bytes] = field(default_factory=list)
    basic: List[Tuple[bytes, bytes]] = field(default_factory=list)

    def accepts(self, authorization: Optional[str]) -> bool:
        """Whether the ``Authorization`` header's value is one of the credentials."""
        if authorization is None:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            return self._token(_digest(value))
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            user, colon, password = decoded.partition(":")
            if not colon:
                return False
            user_digest, password_digest = _digest(user), _digest(password)
            matched = False
            for name, secret in self.basic:
                matched |= hmac.compare_digest(name, user_digest) & hmac.compare_digest(secret, password_digest)
            return self._token(password_digest) | matched
        return False

    def _token(self, digest: bytes) -> bool:
        matched = False
        for token in self.tokens:
            matched |= hmac.compare_digest(token, digest)
        return matched


def load_credentials(path: str) -> Credentials:
    """Reads and checks the credentials file.

    :raises AuthFileProblem: saying why it is refused (``LINE: reason`` for a line).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:  # O_NOFOLLOW: the last component is a symbolic link
            raise AuthFileProblem("a symbolic link: name the file itself") from None
        raise AuthFileProblem(f"cannot open it: {error.strerror}") from None
    with os.fdopen(descriptor, "rb", buffering=0) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise AuthFileProblem("not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & (stat.S_IROTH | stat.S_IWOTH):
            raise AuthFileProblem(
                f"every user may read or write it (mode {mode:04o}): it must be readable only by root and the "
                "service: chmod 0600 it (and hand it to the service with LoadCredential=, docs/DASHBOARD.md)"
            )
        if mode & stat.S_IWGRP:
            raise AuthFileProblem(f"its group may write it (mode {mode:04o}): chmod g-w it")
        if info.st_size > MAX_AUTH_FILE:
            raise AuthFileProblem(f"longer than {MAX_AUTH_FILE} bytes: is this the right file?")
        data = handle.read(MAX_AUTH_FILE + 1)
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthFileProblem("not UTF-8 text") from None
    credentials = Credentials()
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, secret = line.partition(":")
        if colon:
            if not name:
                raise AuthFileProblem(f"line {number}: NAME:PASSWORD with an empty name")
            if len(secret) < MIN_SECRET:
                raise AuthFileProblem(f"line {number}: the password of '{name}' is shorter than {MIN_SECRET} "
                                      "characters (make one with: openssl rand -hex 16)")  # fmt: skip
            credentials.basic.append((_digest(name), _digest(secret)))
        else:
            if len(line) < MIN_SECRET:
                raise AuthFileProblem(f"line {number}: a token is shorter than {MIN_SECRET} characters (make one with: "
                                      "openssl rand -hex 16)")  # fmt: skip
            credentials.tokens.append(_digest(line))
    if not credentials.tokens and not credentials.basic:
        raise AuthFileProblem("it holds no credential (a token, or NAME:PASSWORD, per line)")
    return credentials
