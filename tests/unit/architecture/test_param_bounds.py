"""Parameter bounds are written once, in the profile schema (issue 19, knowledge once): the schema
checks profile files, the catalogue reads the same bounds to check inventory overrides. Every
numeric parameter of a bundled profile has bounds there, and the PCIe sizes are the ones the PCIe
code encodes."""
import glob
import os

import yaml

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import SIZES
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_files, catalogue_load, catalogue_model, catalogue_params, waivers
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import profile_param_schemas

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def bundled_params():
    params = {}
    for path in sorted(glob.glob(os.path.join(REPO, "profiles", "*.yml"))):
        with open(path) as handle:
            params.update((yaml.safe_load(handle) or {}).get("params") or {})
    return params


def test_every_numeric_parameter_has_bounds_in_the_schema():
    schemas = profile_param_schemas()
    numeric = sorted(name for name, value in bundled_params().items()
                     if isinstance(value, (int, float)) and not isinstance(value, bool))
    assert numeric, "no numeric parameter found: the profiles moved?"
    missing = [name for name in numeric if not ({"minimum", "maximum", "enum"} & set(schemas.get(name) or {}))]
    assert missing == []


def test_every_version_parameter_has_its_pattern_in_the_schema():
    constraints = catalogue_params.param_constraints()
    for name in ("kernel_min", "cuda_min_blackwell", "nvidia_driver_min"):
        assert "version" in constraints[name], name
    assert constraints["nvidia_driver_min"]["per_key"] and not constraints["kernel_min"]["per_key"]


def test_pcie_size_parameters_are_the_sizes_the_pcie_code_encodes():
    constraints = catalogue_params.param_constraints()
    for name in ("max_read_request_bytes_gpu", "max_read_request_bytes_nic"):
        assert constraints[name]["choices"] == SIZES


def test_the_catalogue_keeps_no_table_of_its_own():
    """The bounds tables that catalogue.py held until issue 19 are gone (from every module it was split
    into): the schema is the source."""
    for name in ("PARAM_RANGES", "PARAM_CHOICES", "PARAM_PCIE_SIZES", "PARAM_VERSIONS"):
        for module in (catalogue_files, catalogue_load, catalogue_model, catalogue_params, waivers):
            assert not hasattr(module, name), (module.__name__, name)


def test_the_bounds_bite_on_overrides_and_in_profile_files(tmp_path):
    import pytest  # pylint: disable=import-outside-toplevel

    loaded = catalogue_load.load_catalogue()
    with pytest.raises(catalogue_model.CatalogueError, match=r"parameter edac_ce_max must be at least 0, got -1"):
        catalogue_params.resolve_profile(loaded, "generic-nvidia-inference", None, {"edac_ce_max": -1})
    with pytest.raises(catalogue_model.CatalogueError, match=r"parameter smt must be one of on, off, any"):
        catalogue_params.resolve_profile(loaded, "generic-nvidia-inference", None, {"smt": "both"})
