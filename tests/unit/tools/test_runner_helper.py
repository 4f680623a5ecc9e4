"""tests/helpers/runner.py reads ansible-runner's events defensively (issue 34)."""
from helpers.runner import task_events


class _Runner:
    def __init__(self, events):
        self.events = events


def test_runner_events_without_event_data_are_skipped():
    # ansible-runner reports a start-up warning on stderr as a `verbose` event with no event_data
    events = [{"event": "verbose", "stdout": "CryptographyDeprecationWarning: DSA is deprecated"},
              {"event": "runner_on_ok", "event_data": {"task_action": "x.y.z", "res": {"a": 1}}},
              {"event": "runner_on_ok", "event_data": {"task_action": "other"}}]
    assert [e["event_data"]["res"] for e in task_events(_Runner(events), "x.y.z")] == [{"a": 1}]
