"""The pytest plugin: simulated accessories for an app's own tests, without hardware.

Load it with ``pytest -p accmon.testing`` (installed with pip, it also loads by itself through its ``pytest11``
entry point). Its fixture ``accmond`` starts a real ``accmond --simulate --no-udev`` on a temporary socket, with a
temporary state directory and a manifest that allows every accessory to the user running the tests, points
``ACCMON_SOCKET`` at it for the test (so the code under test finds it with no socket given), and stops it at the
end. It is a :class:`~accmon.simulator.SimulatedDaemon`: ``accmond.plug(kind=..., vendor=..., ...)`` returns the new
connection id, ``accmond.unplug(connection_id)`` unplugs it; the accessories stay plugged in across
``accmond.restart()``. To test what an app does when its accessory is taken from it: ``accmond.take(...)`` (someone
else claims it, or waits in line for it: the app hears of the contention), ``accmond.break_claim(...)`` (an admin
breaks the app's claim), ``accmond.reenumerate(...)`` (the board resets), ``accmond.make_node(name)`` (a device node
below ``--simulated-nodes``, where accmond enforces claims).

Where ``accmond`` comes from, first found wins: the option ``--accmond PATH``, the ini setting ``accmond``, the
environment variable ``ACCMON_ACCMOND``, ``accmond`` on ``PATH``, then ``/usr/sbin/accmond``.

.. code-block:: python

    def test_sees_the_adapter(accmond):
        accmond.plug(kind="serial", vendor="0403", product="6001", nodes=["/dev/ttyUSB0"])
        assert accmon.Client().wait_for(kind="serial", timeout=5).device_node == "/dev/ttyUSB0"
"""

from __future__ import annotations

from typing import Iterator, Optional

import pytest

from .simulator import SimulatedDaemon, find_accmond

__all__ = ["accmond", "pytest_addoption"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accmon", "accmon: simulated accessories")
    group.addoption(
        "--accmond",
        dest="accmond",
        default=None,
        metavar="PATH",
        help="the accmond binary the 'accmond' fixture runs (default: $ACCMON_ACCMOND, accmond on PATH, "
        "/usr/sbin/accmond)",
    )
    parser.addini("accmond", "the accmond binary the 'accmond' fixture runs", default=None)


def _configured_accmond(config: pytest.Config) -> Optional[str]:
    option = config.getoption("accmond")
    if option:
        return str(option)
    ini = config.getini("accmond")
    return str(ini) if ini else None


@pytest.fixture
def accmond(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimulatedDaemon]:
    """A running ``accmond --simulate --no-udev --simulated-nodes DIR`` of its own, with ``ACCMON_SOCKET`` pointing
    at it."""
    try:
        binary = find_accmond(_configured_accmond(request.config))
    except FileNotFoundError as error:
        pytest.fail(str(error), pytrace=False)
    daemon = SimulatedDaemon(binary)
    try:
        daemon.start()
    except RuntimeError as error:
        daemon.close()
        pytest.fail(str(error), pytrace=False)
    monkeypatch.setenv("ACCMON_SOCKET", daemon.socket)
    try:
        yield daemon
    finally:
        crashed = daemon.exit_status()
        log = daemon.log()
        status = daemon.close()
        if crashed is not None:
            pytest.fail(f"accmon.testing: accmond exited by itself with status {crashed} during the test:\n{log}",
                        pytrace=False)  # fmt: skip
        if status not in (0, None):
            pytest.fail(f"accmon.testing: accmond did not stop cleanly (exit status {status}):\n{log}", pytrace=False)
