"""controller_libs: the controller's third-party libraries checked at once, one message naming every
missing one and the command that installs them; its table agrees with requirements.txt."""
import os
import re
import sys

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import controller_libs
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import (
    REQUIRED, MissingLibraries, check, message, missing,
)

try:
    from importlib.metadata import requires
except ImportError:  # Python 3.7
    requires = None

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def requirements_txt():
    """``{name: specifier}`` of the collection's requirements.txt (comments and blank lines left out)."""
    out = {}
    with open(os.path.join(REPO, "requirements.txt"), encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line:
                match = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", line)
                assert match, line
                out[match.group(1).lower()] = match.group(2).replace(" ", "")
    return out


def split(requirement):
    name, spec = re.match(r"^([A-Za-z0-9_.-]+)(.*)$", requirement).groups()
    return name.lower(), spec


def test_the_table_states_requirements_txt():
    listed = requirements_txt()
    for module, requirement in REQUIRED:
        name, spec = split(requirement)
        assert name == module.lower()
        assert listed.get(name) == spec, "requirements.txt says %s%s, controller_libs.REQUIRED %s" % (
            name, listed.get(name), requirement)


@pytest.mark.skipif(requires is None, reason="importlib.metadata")
def test_what_requirements_txt_adds_to_the_table_is_no_import_of_the_collection():
    # requirements.txt may bound a dependency of ansible-core (cryptography), which every controller has
    core = set(split(r.split(";")[0])[0] for r in requires("ansible-core") or [])
    for name in set(requirements_txt()) - set(split(r)[0] for dummy, r in REQUIRED):
        assert name in core, "%s is in requirements.txt but not in controller_libs.REQUIRED" % name


def test_nothing_missing_here():
    assert missing() == []
    check()


def test_every_missing_library_is_named_at_once_with_the_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "jmespath", None)
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(MissingLibraries) as caught:
        check()
    text = str(caught.value)
    assert caught.value.missing == ["jmespath", "jsonschema"]
    assert "\n" not in text
    assert text.startswith("gpuhost.baseline needs the Python libraries jmespath, jsonschema on the controller")
    assert "%s -m pip install 'jmespath>=1.0.1,<2' 'jsonschema>=4.18.0,<5'" % sys.executable in text
    assert "-m pip install -r %s)" % controller_libs.REQUIREMENTS_TXT in text
    assert os.path.samefile(controller_libs.REQUIREMENTS_TXT, os.path.join(REPO, "requirements.txt"))
    # never a variable's or a file's fault
    assert "gpuhost_" not in text and "invalid" not in text


def test_one_missing_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    assert missing() == [("jsonschema", None)]
    text = message(["jsonschema"], python="/usr/bin/python3", requirements_txt="")
    assert text == ("gpuhost.baseline needs the Python library jsonschema on the controller, in the Python that runs "
                    "ansible-playbook (/usr/bin/python3): install it with: "
                    "/usr/bin/python3 -m pip install 'jsonschema>=4.18.0,<5'")


def test_a_library_that_fails_on_a_missing_library_of_its_own_says_which(monkeypatch, tmp_path):
    # jsonschema installed without its dependency rpds: named with the reason, not as if it were absent
    package = tmp_path / "gpuhost_fake_lib"
    package.mkdir()
    (package / "__init__.py").write_text("import gpuhost_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = missing([("gpuhost_fake_lib", "gpuhost-fake-lib>=1")])
    assert found == [("gpuhost_fake_lib", "No module named 'gpuhost_no_such_dependency'")]
    text = message(found, [("gpuhost_fake_lib", "gpuhost-fake-lib>=1")], python="py", requirements_txt="")
    assert "library gpuhost_fake_lib (No module named 'gpuhost_no_such_dependency')" in text
    assert text.endswith("py -m pip install 'gpuhost-fake-lib>=1'")


def test_no_requirements_txt_no_mention(monkeypatch):
    monkeypatch.setattr(controller_libs, "REQUIREMENTS_TXT", "/nonexistent/requirements.txt")
    text = message(["jmespath"])
    assert "requirements.txt" not in text and "'jmespath>=1.0.1,<2'" in text


def test_the_lazy_imports_say_the_same(monkeypatch):
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_model

    monkeypatch.setitem(sys.modules, "jmespath", None)
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    monkeypatch.setattr(schema, "_VALIDATORS", {})
    with pytest.raises(catalogue_model.CatalogueError) as caught:
        catalogue_model._jmespath()
    assert str(caught.value) == message(["jmespath"])
    with pytest.raises(schema.SchemaError) as caught:
        schema.validator("waivers")
    assert str(caught.value) == message(["jsonschema"])
