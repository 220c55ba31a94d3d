"""The package as pip installs it: from a copy of the tree, with its typing marker and the pytest11 entry point
that loads the plugin without ``-p``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PYTHON_ROOT

USES_THE_FIXTURE = """
import accmon
def test_plugged(accmond):
    accmond.plug(kind="serial", vendor="0403", nodes=["/dev/ttyUSB0"])
    assert accmon.Client().wait_for(kind="serial", timeout=5).device_node == "/dev/ttyUSB0"
"""


def test_pip_installs_the_tree_with_the_plugin_entry_point(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(PYTHON_ROOT, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(source)],  # fmt: skip
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "accmon" / "py.typed").exists()
    (info,) = target.glob("accmon-*.dist-info")
    assert "accmon.testing = accmon.testing" in (info / "entry_points.txt").read_text()

    tests = tmp_path / "app"
    tests.mkdir()
    (tests / "test_app.py").write_text(USES_THE_FIXTURE)
    environment = dict(os.environ, PYTHONPATH=str(target), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests), str(tests)],
        capture_output=True, text=True, timeout=120, env=environment, cwd=tests,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr  # no -p: the entry point loaded the plugin
    assert "1 passed" in done.stdout
    version = subprocess.run([sys.executable, "-m", "accmon", "--version"], capture_output=True, text=True,
                             env=environment, cwd=tests)  # fmt: skip
    assert version.stdout.startswith("accmon 0.1.0")
