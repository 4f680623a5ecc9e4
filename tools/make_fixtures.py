"""Generate the bundled snapshot directories (docs/snapshot-format.md).

    python tools/make_fixtures.py OUTDIR               # incident, healthy, intel, hostile
    python tools/make_fixtures.py OUTDIR --only large  # the 768-CPU benchmark host
    python tools/make_fixtures.py OUTDIR --lspci-dump  # also OUTDIR/<name>.lspci for lspci -F

Each snapshot lands in OUTDIR/<name>; an earlier generated snapshot there is replaced.
Output is byte for byte deterministic: the same command gives the same tree every run.
"""

import argparse
import os
import sys

# makes ansible_collections.gpuhost.baseline importable
import collection_path  # noqa: F401  pylint: disable=unused-import
# the one generator, shipped in the collection (plugins/plugin_utils/snapshot/snapgen)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import scenarios
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.pciconfig import snapshot_dump


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("outdir", help="directory that receives one sub-directory per snapshot")
    parser.add_argument("--only", action="append", choices=sorted(scenarios.SCENARIOS), metavar="NAME",
                        help="build only this snapshot (repeatable): %s" % ", ".join(sorted(scenarios.SCENARIOS)))
    parser.add_argument("--lspci-dump", action="store_true",
                        help="also write OUTDIR/<name>.lspci: the config files of the snapshot in lspci -F format")
    args = parser.parse_args(argv)

    names = args.only or list(scenarios.DEFAULT)
    os.makedirs(args.outdir, exist_ok=True)
    for name in names:
        target = os.path.join(args.outdir, name)
        try:
            tree, spec, devices = scenarios.write(name, target)
        except FileExistsError as exc:
            parser.exit(2, "make_fixtures: %s\n" % exc)
        if args.lspci_dump:
            with open(os.path.join(args.outdir, name + ".lspci"), "w") as handle:
                handle.write(snapshot_dump(target))
        print("%-9s %s (%d files, %d links, %d PCI functions)"
              % (name, target, len(tree.files), len(tree.links), len(devices)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
