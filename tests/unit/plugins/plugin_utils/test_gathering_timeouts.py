"""gathering.command_timeouts: the audit's gpuhost_command_timeouts as host_facts takes it (issue 40).

A bound the user set reaches the module or fails the host with one line naming the entry; before,
a numeric string ("90") or a bad value was dropped in silence and the tool ran under its default.
"""
import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot import gathering


def test_unset_is_no_override():
    assert gathering.command_timeouts({}) == {}
    assert gathering.command_timeouts(None) == {}
    assert gathering.command_timeouts({"gpuhost_command_timeouts": None}) == {}


def test_numbers_and_numeric_strings_are_kept():
    given = {"gpuhost_command_timeouts": {"nvidia-smi": 5, "journalctl": "10.5", "dmesg": 30.0}}
    assert gathering.command_timeouts(given) == {"nvidia-smi": 5, "journalctl": 10.5, "dmesg": 30.0}


@pytest.mark.parametrize("value, words", [
    ({"nvidia-smi": 0}, "nvidia-smi must be a number of seconds"),
    ({"nvidia-smi": "soon"}, "nvidia-smi must be a number of seconds"),
    ({"nvidia-smi": True}, "nvidia-smi must be a number of seconds"),
    ({"nvidia-smi": 86401}, "from 1 to 86400"),
    (["nvidia-smi", 5], "must be a mapping"),
    ("nvidia-smi=5", "must be a mapping"),
])
def test_a_bad_value_is_one_line_naming_it(value, words):
    with pytest.raises(ValueError) as caught:
        gathering.command_timeouts({"gpuhost_command_timeouts": value})
    assert words in str(caught.value)
    assert str(caught.value).startswith("gpuhost_command_timeouts")
    assert "\n" not in str(caught.value)


class _Action:
    """Stands for the action: gather_host must fail the host before it runs the module."""
    _connection = None

    def _execute_module(self, **kwargs):  # pragma: no cover - must not be reached
        raise AssertionError("the module ran with a bad gpuhost_command_timeouts: %r" % (kwargs,))


def test_gather_host_fails_the_host_without_running_the_module(monkeypatch):
    monkeypatch.setattr(gathering, "_snapshot_here", lambda action, root: False)
    result = gathering.gather_host(_Action(), {"gpuhost_command_timeouts": {"nvidia-smi": -1}}, "/")
    assert result["failed"] is True
    assert "gpuhost_command_timeouts: nvidia-smi" in result["msg"]
