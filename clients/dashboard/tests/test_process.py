"""The reader's output cut into batches: what the reader writes at once is one batch, also past the size of one read,
so that a claim's disconnect and connect pair is taken as the change it is (test_claims.py), never as an unplug."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, List

from accmon_dashboard.process import READ_SIZE, read_lines, stop_task


def test_one_write_longer_than_a_read_is_one_batch(tmp_path: Path) -> None:
    # About 3 reads' worth of lines, written with one write, the last two a disconnect and connect pair; then, after
    # a pause, one more line: two batches.
    filler = [{"type": "connect", "n": index, "pad": "x" * 500} for index in range(3 * READ_SIZE // 530)]
    pair = [{"type": "disconnect", "n": -1}, {"type": "connect", "n": -1}]
    text = "".join(json.dumps(line) + "\n" for line in filler + pair)
    (tmp_path / "lines").write_text(text)
    script = tmp_path / "reader.py"
    script.write_text(
        "import sys, time\n"
        f"sys.stdout.buffer.write(open({str(tmp_path / 'lines')!r}, 'rb').read()); sys.stdout.flush()\n"
        "time.sleep(0.3)\n"
        "sys.stdout.write('{\"type\": \"status\"}\\n'); sys.stdout.flush()\n"
    )
    batches: List[List[Any]] = []

    async def scenario() -> int:
        status, _ = await read_lines([sys.executable, str(script)], batches.append, lambda message: None)
        return status

    assert asyncio.run(scenario()) == 0
    assert len(batches) == 2, [len(batch) for batch in batches]
    assert batches[0] == filler + pair
    assert batches[1] == [{"type": "status"}]


def test_a_task_that_swallows_a_cancellation_is_stopped_all_the_same() -> None:
    # What asyncio.wait_for does before Python 3.12 when the awaited read completes as the cancellation comes
    # (gh-86296): the reader's task goes on reading. A single cancel then left the dashboard running after SIGTERM.
    swallowed: List[int] = []

    async def reader() -> None:
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(1)

    async def scenario() -> bool:
        task = asyncio.ensure_future(reader())
        await asyncio.sleep(0.05)
        await asyncio.wait_for(stop_task(task, every=0.05), 5)
        return task.cancelled()

    assert asyncio.run(scenario())
    assert swallowed == [1]
