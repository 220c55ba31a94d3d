"""The followers of the live stream: a page that falls behind is dropped (its browser reconnects and gets the whole
state), and never holds more than MAX_QUEUED events."""

from __future__ import annotations

import asyncio
import json

from accmon_dashboard.hub import MAX_QUEUED, Hub, encode_event
from accmon_dashboard.records import Delta


def test_a_follower_that_falls_behind_is_dropped_and_the_others_are_not() -> None:
    async def scenario() -> None:
        hub = Hub(lambda: {"rows": []})
        slow, quick = hub.follow(), hub.follow()
        first = await quick.get(1, b"idle")
        assert first is not None and b"event: state" in first and first.startswith(b"retry: 1000\n")
        for number in range(MAX_QUEUED + 10):
            hub.publish(Delta(events=[{"id": number}]))
            data = await quick.get(1, b"idle")
            assert data is not None and json.loads(data.split(b"data: ", 1)[1])["events"] == [{"id": number}]
        assert slow.dropped and len(slow.queue) == 1 and await slow.get(1, b"idle") is None
        assert not quick.dropped
        assert await quick.get(0.05, b"idle") == b"idle"
        hub.leave(slow)
        hub.leave(quick)
        assert hub.dropped == 1 and hub.followers == set()
        hub.publish(Delta())  # nothing changed: nothing sent
        assert hub.sent == MAX_QUEUED + 10

    asyncio.run(scenario())


def test_an_event_is_one_data_line_whatever_the_strings_hold() -> None:
    data = encode_event("delta", {"name": "a\nb\r\n\u2028data: x"})
    assert data.count(b"\n") == 3 and data.endswith(b"\n\n")
    assert json.loads(data.split(b"data: ", 1)[1]) == {"name": "a\nb\r\n\u2028data: x"}


def test_the_reader_is_started_again_after_a_pause_that_doubles_up_to_ten_seconds() -> None:
    from accmon_dashboard.sources import Backoff

    backoff = Backoff()
    assert [backoff.next(ran_for=1) for _ in range(7)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert backoff.next(ran_for=30) == 0.5  # a run of 30 s or more: from the start again
    assert backoff.next(ran_for=1) == 1
