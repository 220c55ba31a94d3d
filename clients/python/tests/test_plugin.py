"""The pytest plugin accmon.testing: the README's example test run as a user runs it, where accmond comes from,
and a daemon that crashes during a test."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Tuple

import pytest

import accmon.simulator
from accmon.simulator import SimulatedDaemon, find_accmond
from conftest import ACCMOND, PYTHON_ROOT, run_python

EXAMPLE = PYTHON_ROOT / "examples" / "test_flasher.py"
CLAIMS_EXAMPLE = PYTHON_ROOT / "examples" / "test_console_claims.py"


def test_the_readme_shows_the_example_tests_as_they_are() -> None:
    readme = (PYTHON_ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert EXAMPLE.read_text() in blocks
    assert CLAIMS_EXAMPLE.read_text() in blocks


def test_every_python_example_of_the_readmes_compiles() -> None:
    for readme in (PYTHON_ROOT / "README.md", PYTHON_ROOT.parent.parent / "README.md"):
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.DOTALL)):
            compile(block, f"{readme}: python block {index + 1}", "exec")


def run_pytest(*arguments: str, **environment: str) -> Tuple[int, str]:
    done = run_python(["-m", "pytest", "-p", "accmon.testing", "-q", "-p", "no:cacheprovider", *arguments],
                      timeout=120, **environment)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_the_example_test_passes_as_a_user_runs_it(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "test_flasher.py")
    status, output = run_pytest(str(tmp_path / "test_flasher.py"), "--rootdir", str(tmp_path))
    assert status == 0, output
    assert "3 passed" in output


def test_the_fixture_sets_accmon_socket_for_the_test_only(accmond: SimulatedDaemon) -> None:
    assert os.environ["ACCMON_SOCKET"] == accmond.socket
    assert accmond.plug(kind="usb") == 1


SCRATCH_TEST = """
import os, signal, time
def test_socket(accmond):
    assert os.environ["ACCMON_SOCKET"] == accmond.socket
def test_crash(accmond):
    while "listening on" not in accmond.log():
        time.sleep(0.01)
    os.kill(accmond.pid, signal.SIGKILL)
    accmond._process.wait()
"""


def test_a_daemon_that_dies_during_a_test_fails_it_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TEST)
    status, output = run_pytest(str(tmp_path / "test_scratch.py"), "--rootdir", str(tmp_path))
    assert status == 1, output
    assert "2 passed, 1 error" in output  # test_crash passes, its teardown errs
    assert "accmon.testing: accmond exited by itself with status -9 during the test:" in output
    assert "notice: listening on" in output  # the log


def test_an_accmond_that_is_not_there_fails_the_test_saying_so(tmp_path: Path) -> None:
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TEST)
    status, output = run_pytest(str(tmp_path / "test_scratch.py"), "--rootdir", str(tmp_path), "-k",
                                "socket", "--accmond", "/nonexistent/accmond")  # fmt: skip
    assert status == 1, output
    assert "accmon.testing: accmond: given path '/nonexistent/accmond' is not an executable file" in output
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naccmond = {ACCMOND}\n")
    status, output = run_pytest(str(tmp_path / "test_scratch.py"), "--rootdir", str(tmp_path), "-k",
                                "socket", ACCMON_ACCMOND="/nonexistent/from-the-environment")  # fmt: skip
    assert status == 0, output  # the ini setting comes before the environment


def test_where_accmond_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "accmond").write_text("#!/bin/sh\n")
    (on_path / "accmond").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setenv("ACCMON_ACCMOND", str(ACCMOND))
    assert find_accmond(str(ACCMOND)) == str(ACCMOND)  # given
    assert find_accmond() == str(ACCMOND)  # the environment
    monkeypatch.delenv("ACCMON_ACCMOND")
    assert find_accmond() == str(on_path / "accmond")  # PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(accmon.simulator, "_PACKAGED_ACCMOND", str(ACCMOND))
    assert find_accmond() == str(ACCMOND)  # where the Debian package puts it
    monkeypatch.setattr(accmon.simulator, "_PACKAGED_ACCMOND", "/nonexistent/usr/sbin/accmond")
    with pytest.raises(FileNotFoundError) as caught:
        find_accmond()
    assert str(caught.value) == (
        "accmon.testing: accmond: not found (accmond on PATH, /nonexistent/usr/sbin/accmond); install the accmon "
        "package, or name it with --accmond PATH or $ACCMON_ACCMOND"
    )


def test_restart_and_kill_keep_the_state_directory_and_the_accessories() -> None:
    with SimulatedDaemon(str(ACCMOND)) as daemon:
        first = daemon.plug(kind="usb", name="Stays plugged in")
        daemon.restart()
        # Simulated accessories stand for hardware: still plugged in, with their connection ids.
        assert [(accessory.connection_id, accessory.name) for accessory in daemon.list()] == [(first, "Stays plugged in")]
        assert daemon.plug(kind="usb") > first  # numbering continues: the state was kept
        daemon.kill()
        assert not daemon.running and daemon.pid is None
        daemon.start()
        assert daemon.running
        assert first in [accessory.connection_id for accessory in daemon.list()]
    assert not os.path.exists(daemon.directory)
