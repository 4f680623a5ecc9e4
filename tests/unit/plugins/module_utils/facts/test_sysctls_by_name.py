"""A sysctl a rule reads by its dotted name (issue 35 item 4): ``kernel.sysctl."vm.dirty_ratio"`` in a rule's
query makes the catalogue ask for it (Catalogue.sysctls), the kernel facts read it (running value and sysctl.d
value) under that name, and the sources name its /proc/sys file when it is unknown: a rule for a sysctl the
collection does not manage is a catalogue entry, no code. Bad names are refused with one line."""
import pytest

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel, sysctls
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import sources
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError, Expr


def test_requested_sysctls_are_read_under_their_dotted_names(tmp_path):
    root = Root(str(write_tree(tmp_path, {
        "/proc/sys/vm/dirty_ratio": "40\n",
        "/proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
        "/etc/sysctl.d/60-site.conf": "vm.dirty_ratio = 10\n",
    })))
    facts = kernel.gather(root, sysctls=["vm.dirty_ratio", "net.ipv4.tcp_rmem", "vm.nr_hugepages"])
    assert facts["sysctl"]["vm.dirty_ratio"] == 40
    assert facts["sysctl"]["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    # asked for and absent: null, with an error naming the file (the rule is unknown with that reason)
    assert facts["sysctl"]["vm.nr_hugepages"] is None
    assert any(e["path"] == "/proc/sys/vm/nr_hugepages" for e in root.errors)
    assert facts["sysctl_persisted"]["vm.dirty_ratio"] == {"value": "10", "file": "/etc/sysctl.d/60-site.conf"}
    # the managed ones keep their short keys
    assert "numa_balancing" in facts["sysctl"]


def test_gather_facts_passes_the_option_to_the_kernel_reader(tmp_path):
    root = Root(str(write_tree(tmp_path, {"/proc/sys/vm/dirty_ratio": "20\n"})))
    facts = gather_facts(root, ["kernel"], {"sysctls": ["vm.dirty_ratio"]})
    assert facts["kernel"]["sysctl"]["vm.dirty_ratio"] == 20
    assert "vm.dirty_ratio" not in gather_facts(Root(str(tmp_path)), ["kernel"])["kernel"]["sysctl"]


@pytest.mark.parametrize("names, words", [
    (["../../etc/shadow"], "is not a sysctl name"),
    (["vm/dirty_ratio"], "is not a sysctl name"),
    (["vm"], "is not a sysctl name"),
    (["vm.*"], "is not a sysctl name"),
    ([7], "is not a sysctl name"),
    ("vm.dirty_ratio", "must be a list"),
    (["vm.x%d" % n for n in range(65)], "65 names, more than the 64"),
])
def test_bad_names_are_one_error_and_nothing_is_read(tmp_path, names, words):
    assert words in sysctls.name_problem(names)
    root = Root(str(write_tree(tmp_path, {"/etc/shadow": "secret\n"})))
    facts = kernel.gather(root, sysctls=names)
    (error,) = [e for e in root.errors if e["path"] == "/proc/sys"]
    assert words in error["reason"]
    assert set(facts["sysctl"]) == set(entry["fact"] for entry in sysctls.SYSCTLS.values())


@pytest.mark.parametrize("text, value", [("1\n", 1), ("-1", -1), ("  7  ", 7), ("always", "always"),
                                         ("", None), ("1 2\n3", "1 2 3"), (None, None)])
def test_sysctl_value(text, value):
    if text == "":
        assert sysctls.sysctl_value(text) == ""
    else:
        assert sysctls.sysctl_value(text) == value


def test_an_expression_names_the_sysctls_it_reads():
    expr = Expr('kernel.sysctl."vm.dirty_ratio" || kernel.sysctl_persisted."vm.dirty_bytes".value', "r: query")
    assert expr.sysctls == ["vm.dirty_bytes", "vm.dirty_ratio"]
    assert Expr("kernel.sysctl.numa_balancing", "r: query").sysctls == []
    with pytest.raises(CatalogueError) as caught:
        Expr('kernel.sysctl."vm/../../x"', "rules/site.yml: rule SITE-1: query")
    assert "rules/site.yml: rule SITE-1: query: sysctls: 'vm/../../x' is not a sysctl name" in str(caught.value)


def test_the_sources_name_the_proc_file_of_a_sysctl_read_by_name():
    key = sources.fact_key('kernel.sysctl."vm.dirty_ratio"')
    assert sources.lookup(key) == ("/proc/sys/vm/dirty_ratio",)
    persisted = sources.lookup(sources.fact_key('kernel.sysctl_persisted."vm.dirty_ratio"'))
    assert persisted == sources.lookup("kernel.sysctl_persisted") and persisted


class _Module:
    """What gather.module_options reads of an AnsibleModule; fail_json raises as the real one exits."""

    def __init__(self, **params):
        self.params = dict({"kernel_log_boots": 1, "sysctls": []}, **params)

    def fail_json(self, msg):
        raise SystemExit(msg)


def test_the_modules_options_are_gather_options_and_a_bad_name_fails_the_module():
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import module_options  # pylint: disable=import-outside-toplevel

    assert module_options(_Module(sysctls=["vm.dirty_ratio"], kernel_log_boots=2)) == {
        "kernel_log_boots": 2, "sysctls": ["vm.dirty_ratio"]}
    with pytest.raises(SystemExit) as caught:
        module_options(_Module(sysctls=["../../etc/shadow"]))
    assert "is not a sysctl name" in str(caught.value)
