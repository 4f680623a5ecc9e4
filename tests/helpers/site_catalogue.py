"""A sample site catalogue directory (gpuhost_catalogue_dirs, docs/profiles.md "Site catalogues"):
a site rule, a site profile extending a bundled one (a severity changed, a rule turned off) and a
waiver file. Used by the playbook tests from the checkout and from the installed collection."""
import textwrap

SITE_RULE = """\
# yaml-language-server: $schema=../../schemas/rules.schema.json
- id: KERNEL-901
  title: running kernel at least 6.10 (site minimum)
  area: kernel
  severity: medium
  label: running kernel
  rationale: The site's container runtime needs 6.10 or newer.
  source: https://docs.kernel.org/admin-guide/README.html
  query: kernel.release
  expect:
    min_kernel: "6.10"
  fix:
    action: kernel_package
    hint: install a kernel at least 6.10 and reboot into it
  reboot_required: true
"""

SITE_PROFILE = """\
description: Our inference fleet - amd-epyc-nvidia with site policy.
extends: amd-epyc-nvidia
rules:
  exclude: [PCI-001]
  severity:
    NUMA-001: low
"""

SITE_WAIVERS = """\
- rule: KERNEL-001
  hosts: [%(waived_host)s]
  reason: 6.14 rollout scheduled
  expires: 2099-01-01
"""

#: the examples of the sample's site rule (``<site>/rules/examples/kernel.yml``): a site runs its own examples
SITE_EXAMPLES = """\
# yaml-language-server: $schema=../../../schemas/rule-examples.schema.json
KERNEL-901:
  pass:
    - {}
  fail:
    - set:
        kernel.release: 6.8.12-4-pve
      message: running kernel 6.8.12-4-pve
      may_also_fail: [KERNEL-001, KERNEL-006]
"""


def make_site(directory, waived_host="demo-incident"):
    """Write the sample under ``directory`` (a pathlib.Path); the waiver names ``waived_host``."""
    for rel, text in (("rules/kernel.yml", SITE_RULE), ("profiles/site-inference.yml", SITE_PROFILE),
                      ("waivers/rollout.yml", SITE_WAIVERS % {"waived_host": waived_host})):
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return directory


def write(path, text):
    """Write ``text`` (dedented; bytes as they are) to the pathlib ``path``, parents made; return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def private_catalogue_cache(tmp_path, monkeypatch):
    """Body of an autouse fixture: the catalogue's disk cache under ``tmp_path`` and its memory
    cache empty before and after the test (``yield from`` it)."""
    # imported here: helpers are imported by tests that run before the collection link exists
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load  # pylint: disable=import-outside-toplevel

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    catalogue_load._CACHE.clear()
    yield
    catalogue_load._CACHE.clear()
