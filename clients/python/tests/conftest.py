"""Shared set-up of the Python client's tests: the binaries under test, and helpers.

The tests run against the real accmond and accmon built from this tree. ``ACCMON_BIN_DIR`` names the directory
that holds them (the Makefile passes its debug build directory); by default, the tree's ``.build/debug``. The
``accmond`` fixture comes from the plugin under test, :mod:`accmon.testing` (loaded with ``-p accmon.testing`` in
pyproject.toml), and runs the accmond of ``ACCMON_BIN_DIR`` through ``ACCMON_ACCMOND``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

PYTHON_ROOT = Path(__file__).resolve().parent.parent
REPO_ROOT = PYTHON_ROOT.parent.parent
SOURCE = PYTHON_ROOT / "src"
BIN_DIR = Path(os.environ.get("ACCMON_BIN_DIR") or REPO_ROOT / ".build" / "debug").resolve()
ACCMOND = BIN_DIR / "accmond"
ACCMON = BIN_DIR / "accmon"


def pytest_configure(config: pytest.Config) -> None:
    missing = [str(path) for path in (ACCMOND, ACCMON) if not os.access(path, os.X_OK)]
    if missing:
        raise pytest.UsageError(
            f"python client tests: {', '.join(missing)}: not built; build them (`swift build --product accmond` and "
            "`--product accmon`) or set ACCMON_BIN_DIR to the directory that holds them"
        )
    os.environ["ACCMON_ACCMOND"] = str(ACCMOND)


def child_environment(**extra: str) -> Dict[str, str]:
    """The environment for a child Python that imports this tree's accmon package."""
    environment = dict(os.environ, PYTHONPATH=str(SOURCE), PYTHONDONTWRITEBYTECODE="1")
    environment.update(extra)
    return environment


def run_python(arguments: List[str], timeout: float = 30, **extra: str) -> "subprocess.CompletedProcess[str]":
    """Runs ``python3 ARGUMENTS`` (this interpreter) with the tree's accmon importable."""
    return subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, timeout=timeout, env=child_environment(**extra)
    )


def eventually(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Waits until `condition()` holds; fails the test with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def require_root(reason: str) -> Optional[None]:
    """Skips the calling test unless it runs as root (it needs another user, or chroot)."""
    if os.getuid() != 0:
        pytest.skip(f"needs root: {reason}")
    return None
