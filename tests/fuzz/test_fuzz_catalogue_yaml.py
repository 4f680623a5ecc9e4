"""The bomb corpus of site catalogues (issue 18, items 5, 6, 8, 11 and 12), each case bounded.

A site catalogue directory (gpuhost_catalogue_dirs) may be a shared one that anybody can write to,
and the tool runs as root. Each case below builds a hostile site directory here, then loads (and
for rule queries evaluates) it in a child process limited to 10 s and 512 MiB
(``helpers.bounded``); the case passes when the child ends by itself with the refusal the
guarantee promises. Before these guarantees the alias bomb, the FIFO, /dev/zero, the deep
nesting and the query bombs hung, ran out of memory or crashed.
"""
import os
import random

import pytest

from helpers import bounded
from helpers.site_catalogue import SITE_RULE

KIND = "catalogue YAML"
SECRET = "SECRET-5e1b7a"

SITE_PROFILE = "description: Our inference fleet.\nextends: amd-epyc-nvidia\n"

#: Loads the site directory ARGS[0]/site (and evaluates the healthy host against it) with PyYAML's
#: C loader or (ARGS[1] "python") its pure-Python one; reports the CatalogueError's message or
#: KERNEL-901's findings.
LOAD = """
os.environ["XDG_CACHE_HOME"] = os.path.join(ARGS[0], "cache")
if ARGS[1] == "python":  # PyYAML without libyaml: the pure-Python parser and composer
    import yaml
    yaml.__dict__.pop("CSafeLoader", None)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from helpers.baseline_facts import healthy_facts

site = os.path.join(ARGS[0], "site")
try:
    cat = catalogue_load.load_catalogue(site_dirs=[site])
    catalogue_load.validate(site_dirs=[site])
    result = evaluation.evaluate(healthy_facts(), profile="site-inference", host="gpu01", today="2026-06-01",
                                 catalogue=cat, waiver_files=cat.waiver_files)
    report({"findings": [dict((k, f[k]) for k in ("status", "message")) for f in result["findings"]
                         if f["id"] == "KERNEL-901"]})
except CatalogueError as exc:
    report({"error": str(exc)})
"""


def make_site(tmp_path, files=None):
    """A site directory with the sample rule and profile, ``files`` ({relpath: text or bytes}) over it."""
    site = tmp_path / "site"
    contents = {"rules/kernel.yml": SITE_RULE, "profiles/site-inference.yml": SITE_PROFILE}
    contents.update(files or {})
    for rel, text in contents.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    return site


def run(tmp_path, loader="c"):
    outcome = bounded.run_case(KIND, bounded.case(LOAD), str(tmp_path), loader)
    return outcome.result


def refused(tmp_path, *fragments, loader="c"):
    """The child's error, checked to hold each of ``fragments`` and to be one printable line."""
    result = run(tmp_path, loader)
    assert "error" in result, result
    message = result["error"]
    for fragment in fragments:
        assert fragment in message, message
    assert message.isprintable() and len(message) < 1200, message
    assert SECRET not in message
    return message


def unknown(tmp_path, *fragments):
    """KERNEL-901's one finding, checked to be ``unknown`` naming the rule and a bound."""
    result = run(tmp_path)
    assert "findings" in result, result
    (finding,) = result["findings"]
    assert finding["status"] == "unknown", finding
    assert finding["message"].startswith("KERNEL-901 not judged: its query went over the cost bound of a rule ("), finding
    for fragment in fragments:
        assert fragment in finding["message"], finding
    return finding


def site_rule(query):
    return SITE_RULE.replace("  query: kernel.release\n", "  query: \"%s\"\n" % query)


# -- the baseline: a good site directory loads and judges within the bounds -----------------------------

def test_a_good_site_directory_loads_and_judges(tmp_path):
    make_site(tmp_path, {"waivers/rollout.yml": "- rule: KERNEL-901\n  reason: r\n  expires: 2099-01-01\n"})
    result = run(tmp_path)
    assert result["findings"] == [{"status": "pass", "message": result["findings"][0]["message"]}], result


# -- item 5: YAML -----------------------------------------------------------------------------------------

def alias_bomb():
    """A site profile like the issue's 583-byte one: nine levels of nine aliases, 427 bytes that
    are 9**9 strings once walked (a schema check, a deep copy)."""
    lines = [SITE_PROFILE.rstrip("\n"), "params:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append("  %s: &%s [%s]" % (name, name, ",".join(["*" + prev] * 9)))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("loader", ["c", "python"])
def test_the_alias_bomb_is_refused_at_its_first_anchor(tmp_path, loader):
    text = alias_bomb()
    assert len(text) < 600
    make_site(tmp_path, {"profiles/site-inference.yml": text})
    refused(tmp_path, "site-inference.yml: line 4, column 6: anchors and aliases are not allowed", loader=loader)


def test_a_100_mb_file_is_refused_unread(tmp_path):
    site = make_site(tmp_path)
    with open(str(site / "rules" / "kernel.yml"), "r+b") as handle:
        handle.seek(0, 2)
        handle.truncate(100 * 1024 * 1024)  # sparse: NUL bytes after the rule
    refused(tmp_path, "kernel.yml: refused: is larger than 1048576 bytes")


def test_a_file_of_a_million_values_is_refused(tmp_path):
    make_site(tmp_path, {"rules/kernel.yml": "- [" + "0," * 500000 + "0]\n"})  # 1 MB, just under the cap
    refused(tmp_path, "kernel.yml: line 1, column ", "more than 100000 values")


@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000 + "\n",
    "- " * 50000 + "x\n",
    "".join("%sk:\n" % (" " * i) for i in range(1400)),
    "{a: " * 30000 + "x" + "}" * 30000 + "\n",
], ids=["flow-sequences", "block-sequences", "block-mappings", "flow-mappings"])
@pytest.mark.parametrize("loader", ["c", "python"])
def test_deep_nesting_is_refused_before_it_is_composed(tmp_path, text, loader):
    """The pure-Python composer recursed into ``[[[[...`` (RecursionError, no place); libyaml's
    scanner stops at 1000 levels by itself; the event scan stops both at 32, naming the place."""
    make_site(tmp_path, {"rules/kernel.yml": text})
    message = refused(tmp_path, "kernel.yml: ", "line 1, column " if "[" in text or "{" in text else "line ", loader=loader)
    assert "nested deeper than 32" in message or "exceeded maximum nesting depth" in message, message


def test_a_number_of_a_million_digits_is_refused(tmp_path):
    make_site(tmp_path, {"profiles/site-inference.yml": SITE_PROFILE + "priority: " + "9" * 1000000 + "\n"})
    refused(tmp_path, "site-inference.yml: line 3, column 11: a number of 1000000 characters")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_garbage_bytes_are_refused_with_a_place_and_not_quoted(tmp_path, seed):
    noise = random.Random(seed)
    data = bytes(noise.randrange(256) for unused in range(64 * 1024))
    make_site(tmp_path, {"profiles/site-inference.yml": data})
    refused(tmp_path, "site-inference.yml: ")


# -- items 6 and 8: links, special files --------------------------------------------------------------------

def test_a_fifo_is_refused_not_waited_on(tmp_path):
    site = make_site(tmp_path)
    (site / "waivers").mkdir()
    os.mkfifo(str(site / "waivers" / "pipe.yml"))
    refused(tmp_path, "pipe.yml: refused: is a FIFO, not a regular file")


def test_a_link_to_dev_zero_is_refused_not_read(tmp_path):
    site = make_site(tmp_path)
    os.symlink("/dev/zero", str(site / "profiles" / "zero.yml"))
    refused(tmp_path, "zero.yml: refused: is a symbolic link")


def test_a_link_out_of_the_site_directory_is_refused_and_its_content_never_quoted(tmp_path):
    outside = tmp_path / "private" / "shadow"
    outside.parent.mkdir()
    outside.write_text("root:$6$%s:19000:0:99999:7:::\n" % SECRET)
    site = make_site(tmp_path)
    os.symlink(str(outside), str(site / "profiles" / "x.yml"))
    os.symlink("../../private/shadow", str(site / "rules" / "kernel-extra.yml"))
    refused(tmp_path, "refused: is a symbolic link")


def test_a_linked_subdirectory_is_refused(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    (private / "x.yml").write_text("%s: 1\n" % SECRET)
    site = make_site(tmp_path)
    os.symlink(str(private), str(site / "waivers"))
    refused(tmp_path, "waivers: is a symbolic link")


# -- item 11: dates -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("date", ["2025-02-30", "2025-13-01", "0000-01-01", "9999-99-99", "2025-02-30T25:61:00Z"])
def test_an_invalid_unquoted_date_names_file_waiver_and_field(tmp_path, date):
    make_site(tmp_path, {"waivers/rollout.yml": "- rule: KERNEL-901\n  reason: r\n  expires: %s\n" % date})
    refused(tmp_path, "rollout.yml: waiver #1 (rule KERNEL-901): expires must be a date YYYY-MM-DD, got '%s'" % date)


# -- item 12: rule queries ----------------------------------------------------------------------------------

def test_the_26_deep_to_string_query_is_refused_when_loaded(tmp_path):
    query = "kernel.release"
    for unused in range(26):
        query = "to_string([%s])" % query
    make_site(tmp_path, {"rules/kernel.yml": site_rule(query)})
    refused(tmp_path, "kernel.yml: rule KERNEL-901: query: ", "function calls nested 26 deep (at most 6)")


def test_a_string_doubling_pipe_is_stopped_at_the_character_budget(tmp_path):
    stage = "to_string([@,@,@,@,@,@,@,@])"
    make_site(tmp_path, {"rules/kernel.yml": site_rule("length(%s)" % " | ".join([stage] * 8))})
    unknown(tmp_path, "characters")


def test_a_value_doubling_pipe_is_stopped_at_the_value_budget(tmp_path):
    make_site(tmp_path, {"rules/kernel.yml": site_rule(" | ".join(["@"] + ["[@,@]"] * 20))})
    unknown(tmp_path, "values")


def test_a_flatten_doubling_pipe_is_stopped_at_the_step_budget(tmp_path):
    query = "length(%s)" % " | ".join(["[@,@,@,@,@,@,@,@]"] + ["[@,@,@,@,@,@,@,@][]"] * 10)
    make_site(tmp_path, {"rules/kernel.yml": site_rule(query)})
    unknown(tmp_path, "steps")


def test_an_equality_of_two_unrolled_values_is_stopped(tmp_path):
    side = " | ".join(["@"] + ["[@,@]"] * 16)
    make_site(tmp_path, {"rules/kernel.yml": site_rule("(%s) == (%s)" % (side, side))})
    unknown(tmp_path)
