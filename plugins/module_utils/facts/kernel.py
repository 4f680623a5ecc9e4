# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel facts: release, preemption model, running and configured command line, sysctls, THP.

The module has two layers (docs/facts.md, section ``kernel``):

* pure parsers over text, which never raise and return ``None`` or partial results for
  bad input: :func:`parse_cmdline`, :func:`parse_grub_default` and :func:`grub_config` (GRUB
  defaults read, never run, by the shell reader of ``facts/shell.py``),
  :func:`parse_bracketed`, :func:`parse_os_release`, :func:`parse_sysctl_conf`,
  :func:`merge_sysctl`, :func:`preempt_build`, :func:`preempt_model`,
  :func:`compare_kernel_release`, :func:`kernel_release_at_least`, :func:`detect_bootloader`;
* :func:`gather`, which reads through a :class:`host.root.Root` and records every unreadable
  value in ``root.errors``.
"""

from __future__ import absolute_import, division, print_function

import functools
import gzip
import io
import re
import zlib

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import as_text
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.shell import (
    parse_shell_assignments, read_word, static_scan)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import SYSCTLS, name_problem, proc_path, sysctl_value

__metaclass__ = type

SUBSYSTEM = "kernel"

# -- running command line -------------------------------------------------------------

KERNEL_SPACE = " \t\n\r\x0b\x0c\x00"  # the kernel's isspace(), NUL included


def cmdline_word_spans(text):
    """``[(start, end)]`` of each word of a kernel command line: words end at whitespace
    (``isspace()`` in the kernel, NUL included) outside double quotes."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in KERNEL_SPACE:
            i += 1
        if i >= n:
            break
        start = i
        in_quote = False
        while i < n and (in_quote or text[i] not in KERNEL_SPACE):
            if text[i] == '"':
                in_quote = not in_quote
            i += 1
        spans.append((start, i))
    return spans


def split_cmdline(text):
    """Split a kernel command line the way the kernel's ``next_arg()`` does.

    Returns ``(params, init_args)``: ``params`` is the ordered list of ``(key, value)`` pairs
    handed to the kernel (``value`` is ``True`` for a bare flag), ``init_args`` the words after
    a bare ``--``, which the kernel passes to init and never interprets itself.

    Only double quotes group words, and a quote may open anywhere in a word
    (``foo="a b"``, ``"foo=a b"``); like the kernel, one pair of quotes around the value
    (or around the whole word) is removed and inner quotes are kept.
    """
    text = as_text(text)
    if not text:
        return [], []
    words = [text[start:end] for start, end in cmdline_word_spans(text)]

    params = []
    for index, word in enumerate(words):
        end_stripped = False
        if word.startswith('"'):
            word = word[1:]
            if word.endswith('"'):
                word = word[:-1]
                end_stripped = True
        key, sep, value = word.partition("=")
        if not sep:
            if key == "--":
                return params, words[index + 1:]
            if key:
                params.append((key, True))
            continue
        if value.startswith('"'):
            value = value[1:]
            if not end_stripped and value.endswith('"'):
                value = value[:-1]
        if key:
            params.append((key, value))
    return params, []


def parse_cmdline(text):
    """Map each kernel parameter of ``text`` to its last value (flags map to ``True``).

    Parameters after a bare ``--`` belong to init and are left out. Keys are kept as written:
    the kernel treats ``-`` and ``_`` in parameter names as equal, so use
    :func:`cmdline_value` to look a parameter up regardless of spelling.
    """
    params, _init = split_cmdline(text)
    result = {}
    for key, value in params:
        # re-insert so that dict order follows the last occurrence
        result.pop(key, None)
        result[key] = value
    return result


def _param_name(key):
    return key.replace("-", "_")


def cmdline_value(params, name):
    """Value of parameter ``name`` in a :func:`parse_cmdline` dict, ``-``/``_`` insensitive.

    The last occurrence wins, as in the kernel; ``None`` when the parameter is absent.
    """
    if not isinstance(params, dict):
        return None
    wanted = _param_name(name)
    found = None
    for key, value in params.items():
        if _param_name(key) == wanted:
            found = value
    return found


GRUB_CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")


#: the most ``/etc/default/grub.d/*.cfg`` files read (distributions ship one to three); past it the
#: configured command line is unknown, not read from thousands of files
GRUB_D_MAX = 256


def grub_d_names(names):
    """The ``*.cfg`` names of ``/etc/default/grub.d`` that grub-mkconfig's ``*.cfg`` glob sources:
    not the hidden ones, which a shell glob leaves out."""
    return [name for name in names if name.endswith(".cfg") and not name.startswith(".")]


def grub_config(sources, env=None):
    """The GRUB command-line variables after sh sources ``sources`` (``[(path, text)]`` in the order
    grub-mkconfig sources them: ``/etc/default/grub``, then ``/etc/default/grub.d/*.cfg``).

    Returns ``{"values", "raw", "assignments", "problems"}``: ``values`` maps each assigned
    command-line variable to its value; ``raw`` is :func:`grub_cmdline` of them, ``None`` when
    ``problems`` (``[(path, line, reason)]`` from :func:`static_assignments`) is not empty;
    ``assignments`` maps each variable to the assignment in effect, ``(index in sources, line,
    start, end of the value word)``. ``env`` seeds the values of files sourced before.
    """
    values = dict((name, value) for name, value in (env or {}).items() if name in GRUB_CMDLINE_VARS)
    assignments = {}
    problems = []
    for index, (path, text) in enumerate(sources):
        text = as_text(text) or ""
        joined, where, found, file_problems = static_scan(text, GRUB_CMDLINE_VARS)
        problems.extend((path, line, reason) for line, reason in file_problems)
        if file_problems:
            continue
        for name, line, start, end in found:
            # read as sh reads it (continuations joined); the span kept is the file's own
            value, _end, problem = read_word(joined, start, values)
            if problem:  # not expected after the check; never guess
                problems.append((path, line, "assigns %s a value that cannot be evaluated (%s)" % (name, problem)))
                continue
            values[name] = value
            if where is not None:
                start, end = where[start], where[end - 1] + 1 if end > start else where[start]
            assignments[name] = (index, line, start, end)
    return {"values": values, "raw": None if problems else grub_cmdline(values), "assignments": assignments,
            "problems": problems}


def grub_cmdline(values):
    """What ``grub-mkconfig`` passes to a normal (non-recovery) entry, from evaluated variables.

    ``GRUB_CMDLINE_LINUX`` + space + ``GRUB_CMDLINE_LINUX_DEFAULT``, stripped; ``""`` when
    neither is set; ``None`` when one of them could not be evaluated.
    """
    parts = []
    for name in GRUB_CMDLINE_VARS:
        if name in values:
            if values[name] is None:
                return None
            parts.append(values[name].strip())
    return " ".join(part for part in parts if part)


def parse_grub_default(text, env=None):
    """``/etc/default/grub`` -> ``{"GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT", "raw",
    "params", "problems", "values"}``.

    ``raw`` is :func:`grub_cmdline` of the file's command-line variables and ``params`` its
    :func:`parse_cmdline`. The command-line variables and ``raw``/``params`` are ``None`` when their
    values cannot be known without running the file (:func:`static_assignments`; ``problems``
    says why, ``"line N reason"``). ``values`` has every plain assignment of the file
    (:func:`parse_shell_assignments`). ``env`` carries values from files sourced before.
    """
    values, problems = parse_shell_assignments(text, env)
    config = grub_config([("", text)], env)
    problems = problems + ["line %d %s" % (line, reason) for _path, line, reason in config["problems"]]
    raw = config["raw"]
    for name in GRUB_CMDLINE_VARS:
        if raw is None:
            if name in values:
                values[name] = None
        elif name in config["values"]:
            values[name] = config["values"][name]
    return {
        "GRUB_CMDLINE_LINUX": values.get("GRUB_CMDLINE_LINUX"),
        "GRUB_CMDLINE_LINUX_DEFAULT": values.get("GRUB_CMDLINE_LINUX_DEFAULT"),
        "raw": raw,
        "params": parse_cmdline(raw) if raw is not None else None,
        "problems": problems,
        "values": values,
    }


def parse_os_release(text):
    """``/etc/os-release`` (shell-compatible ``KEY=value`` lines) -> dict of every key."""
    values, _problems = parse_shell_assignments(text)
    return dict((key, value) for key, value in values.items() if value is not None)


# -- bracketed selections (THP, sched/preempt) ----------------------------------------

_BRACKET_RE = re.compile(r"\[([^\[\]\s]+)\]|\(([^()\s]+)\)")


def parse_bracketed(text):
    """The selected word of ``always [madvise] never`` (or ``none (voluntary) full``).

    sysfs marks the active choice with brackets; ``/sys/kernel/debug/sched/preempt`` uses
    parentheses. ``None`` when nothing, or more than one word, is selected.
    """
    text = as_text(text)
    if not text:
        return None
    found = [a or b for a, b in _BRACKET_RE.findall(text)]
    if len(found) != 1:
        return None
    return found[0]


# -- sysctl.d ------------------------------------------------------------------------------

#: systemd-sysctl search path, highest priority first (a name in /etc shadows the others).
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
SYSCTL_CONF = "/etc/sysctl.conf"


def normalize_sysctl_key(key):
    """``kernel/numa_balancing`` -> ``kernel.numa_balancing``.

    Like systemd, the first separator decides: a key whose first separator is ``/`` has
    every ``/`` and ``.`` swapped (``net/ipv4/conf/eth0.10/rp_filter`` ->
    ``net.ipv4.conf.eth0/10.rp_filter``).
    """
    for ch in key:
        if ch == ".":
            return key
        if ch == "/":
            return key.translate({ord("/"): ".", ord("."): "/"})
    return key


def parse_sysctl_conf(text):
    """``key = value`` lines -> dict of normalised key to value (last one in the file wins).

    ``#`` and ``;`` start comment lines; a leading ``-`` on a key (ignore write failures) is
    dropped; lines without ``=`` are ignored, as systemd-sysctl does.
    """
    text = as_text(text)
    result = {}
    if not text:
        return result
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key.startswith("-"):
            key = key[1:].strip()
        if not key:
            continue
        key = normalize_sysctl_key(key)
        result.pop(key, None)
        result[key] = value.strip()
    return result


def sysctl_file_order(listing):
    """Paths systemd-sysctl applies, in order, from ``{dir: [file names]}``.

    Every ``*.conf`` name is taken from the highest-priority directory that has it
    (:data:`SYSCTL_DIRS` order), the names are applied sorted, and ``/etc/sysctl.conf``
    comes last, so a value there wins.
    """
    chosen = {}
    for directory in SYSCTL_DIRS:
        for name in listing.get(directory) or ():
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = directory + "/" + name
    return [chosen[name] for name in sorted(chosen)] + [SYSCTL_CONF]


def merge_sysctl(files):
    """``[(path, text), ...]`` in application order -> ``{key: {"value", "file"}}``."""
    merged = {}
    for path, text in files:
        for key, value in parse_sysctl_conf(text).items():
            merged[key] = {"value": value, "file": path}
    return merged


# -- preemption --------------------------------------------------------------------------

PREEMPT_MODES = ("none", "voluntary", "full", "lazy")
_UTS_VERSION_RE = re.compile(r"\s*#\d+")


def preempt_build(version):
    """Preemption model compiled in, from ``/proc/sys/kernel/version``.

    ``PREEMPT_RT``, ``PREEMPT_DYNAMIC``, ``PREEMPT`` or ``none``; ``None`` without a version.
    Older RT patch sets wrote ``PREEMPT RT``.
    """
    version = as_text(version)
    # UTS_VERSION always starts with "#<build number>"; anything else is not a version string
    if not version or not _UTS_VERSION_RE.match(version):
        return None
    words = version.split()
    if "PREEMPT_RT" in words:
        return "PREEMPT_RT"
    for left, right in zip(words, words[1:]):
        if left == "PREEMPT" and right == "RT":
            return "PREEMPT_RT"
    if "PREEMPT_DYNAMIC" in words:
        return "PREEMPT_DYNAMIC"
    if "PREEMPT" in words:
        return "PREEMPT"
    return "none"


def preempt_model(build, cmdline_value_, debugfs):
    """Effective preemption model (docs/facts.md ``preempt.model``).

    debugfs wins; else ``preempt=`` on a ``PREEMPT_DYNAMIC`` build (when it names a known
    mode: the kernel ignores others); else ``full`` for ``PREEMPT``/``PREEMPT_RT`` builds,
    ``none`` for builds without preemption and ``None`` for a dynamic build whose mode is
    unknown (its default is a Kconfig choice not visible from userspace).
    """
    if debugfs:
        return debugfs
    if build == "PREEMPT_DYNAMIC":
        if isinstance(cmdline_value_, str) and cmdline_value_.lower() in PREEMPT_MODES:
            return cmdline_value_.lower()
        return None
    if build in ("PREEMPT", "PREEMPT_RT"):
        return "full"
    if build == "none":
        return "none"
    return None


# -- kernel release comparison ------------------------------------------------------------

_UPSTREAM_RE = re.compile(r"\s*(\d+)\.(\d+)(?:\.(\d+))?")
_ARCH_TOKENS = frozenset(("x86_64", "amd64", "aarch64", "arm64", "i686", "i386", "ppc64le", "ppc64", "s390x",
                          "riscv64", "armhf", "armv7l", "noarch"))
_DIGITS_RE = re.compile(r"\d+")


def _release_key(release):
    """``6.8.12-4-pve`` -> ``((6, 8, 12), (4,))``; ``None`` for text that is not a release.

    The upstream version is the leading ``X.Y[.Z]``. The distro part is every number of the
    rest up to the first word without digits (the flavour: ``pve``, ``generic``, ``cloud``);
    architecture words (``x86_64``, ``amd64``) are skipped, so ``427.13.1.el9_4.x86_64`` gives
    ``(427, 13, 1, 9, 4)`` and ``18-amd64`` gives ``(18,)``.
    """
    release = as_text(release)
    if not release:
        return None
    match = _UPSTREAM_RE.match(release)
    if not match:
        return None
    upstream = tuple(int(part) if part is not None else 0 for part in match.groups())
    rest = release[match.end():].strip()
    build = []
    # "_" stays inside words so that "x86_64" remains one (architecture) word
    for word in re.split(r"[.+~-]", rest):
        if not word or word in _ARCH_TOKENS:
            continue
        numbers = _DIGITS_RE.findall(word)
        if not numbers:
            break
        build.extend(int(number) for number in numbers)
    return upstream, tuple(build)


def compare_kernel_release(a, b):
    """``-1``, ``0`` or ``1`` as release ``a`` is older than, equal to or newer than ``b``.

    Upstream numbers are compared first (``6.8.12`` < ``6.14.8``), then the distro build
    numbers (``5.14.0-427.el9`` < ``5.14.0-503.el9``; ``6.8.12-4-pve`` > ``6.8.12``).
    Flavours are not compared. Returns ``None`` when either side is not a kernel release.
    """
    key_a = _release_key(a)
    key_b = _release_key(b)
    if key_a is None or key_b is None:
        return None
    if key_a == key_b:
        return 0
    return -1 if key_a < key_b else 1


def kernel_release_at_least(release, minimum):
    """``True`` when ``release`` is ``minimum`` or newer; ``None`` when not comparable."""
    result = compare_kernel_release(release, minimum)
    if result is None:
        return None
    return result >= 0


def sort_releases(releases):
    """Releases oldest first; ones that do not parse go last, by name."""
    def cmp(a, b):
        ka, kb = _release_key(a), _release_key(b)
        if ka is not None and kb is not None and ka != kb:
            return -1 if ka < kb else 1
        if (ka is None) != (kb is None):
            return 1 if ka is None else -1
        return (a > b) - (a < b)
    return sorted(set(releases), key=functools.cmp_to_key(cmp))


# -- boot loader ------------------------------------------------------------------------------

def detect_bootloader(exists):
    """Which boot loader consumes the configured command line: ``systemd-boot``, ``bls``,
    ``grub`` or ``None``.

    ``exists(path)`` answers for host paths (``/boot/loader/entries/*.conf`` means "at least one
    entry file"). The decision, in order:

    1. ``systemd-boot`` when ``/etc/kernel/cmdline`` exists and one of:
       ``/etc/kernel/proxmox-boot-uuids`` exists (Proxmox's proxmox-boot-tool copies kernels
       and that command line to its ESPs), ``/boot/efi/loader`` exists (systemd-boot's
       directory on an ESP mounted at /boot/efi), or BLS entries exist and
       ``/etc/default/grub`` does not (nothing else reads the entries);
    2. ``bls`` when ``/etc/default/grub`` exists, BLS entries exist and ``/etc/redhat-release``
       exists: GRUB on EL/Fedora boots BLS entries whose ``options`` grubby maintains;
    3. ``grub`` when ``/etc/default/grub`` exists;
    4. ``None`` otherwise.
    """
    kernel_cmdline = exists("/etc/kernel/cmdline")
    grub = exists("/etc/default/grub")
    entries = exists("/boot/loader/entries/*.conf")
    if kernel_cmdline and (exists("/etc/kernel/proxmox-boot-uuids") or exists("/boot/efi/loader")
                           or (entries and not grub)):
        return "systemd-boot"
    if grub and entries and exists("/etc/redhat-release"):
        return "bls"
    if grub:
        return "grub"
    return None


# -- gathering ----------------------------------------------------------------------------

_CMDLINE_CACHE = "_gpuhost_proc_cmdline"


def read_running_cmdline(root, subsystem=SUBSYSTEM):
    """``/proc/cmdline`` text of ``root``, read once per :class:`Root` and shared by gatherers.

    The first caller records the error when it is unreadable; later callers get ``None``
    without a duplicate error.
    """
    cache = root.__dict__.get(_CMDLINE_CACHE)
    if cache is not None:
        return cache[0]
    text = root.read_text("/proc/cmdline", subsystem)
    root.__dict__[_CMDLINE_CACHE] = (text,)
    return text


def _entries_exist(root):
    return bool(root.listdir("/boot/loader/entries", pattern="*.conf"))


def _configured_cmdline(root):
    def exists(path):
        if path == "/boot/loader/entries/*.conf":
            return _entries_exist(root)
        return root.exists(path)

    result = {"source": None, "raw": None, "params": None, "bootloader": detect_bootloader(exists)}
    if root.exists("/etc/kernel/cmdline"):
        result["source"] = "/etc/kernel/cmdline"
        text = root.read_text("/etc/kernel/cmdline", SUBSYSTEM)
        if text is not None:
            # meant to be one line; the tools that read it turn further lines into spaces
            raw = " ".join(line.strip() for line in text.splitlines() if line.strip())
            result["raw"] = raw
            result["params"] = parse_cmdline(raw)
        return result
    if root.exists("/etc/default/grub"):
        result["source"] = "/etc/default/grub"
        text = root.read_text("/etc/default/grub", SUBSYSTEM)
        if text is None:
            return result
        # grub-mkconfig sources /etc/default/grub, then /etc/default/grub.d/*.cfg in name order; the
        # value is known only when every write to the command-line variables is a plain top-level
        # assignment (static_assignments): otherwise null and an error naming the line
        sources = [("/etc/default/grub", text)]
        names = grub_d_names(root.listdir("/etc/default/grub.d", pattern="*.cfg"))
        if len(names) > GRUB_D_MAX:
            root.error(SUBSYSTEM, "/etc/default/grub.d", "%d *.cfg files, more than the %d read; the configured "
                       "command line is unknown" % (len(names), GRUB_D_MAX))
            return result
        for name in names:
            path = "/etc/default/grub.d/" + name
            extra = root.read_text(path, SUBSYSTEM)
            if extra is None:
                # unreadable (an error is recorded): what it assigns is unknown
                return result
            sources.append((path, extra))
        config = grub_config(sources)
        reported = set()
        for path, line, reason in config["problems"]:
            if path not in reported:
                reported.add(path)
                root.error(SUBSYSTEM, path, "line %d %s (the effective value depends on the shell); the configured "
                           "command line is unknown" % (line, reason))
        if config["raw"] is not None:
            result["raw"] = config["raw"]
            result["params"] = parse_cmdline(config["raw"])
    return result


#: Options of the running kernel's build configuration that the rules read (docs/facts.md,
#: ``kernel.config``): every option whose name starts with one of these.
CONFIG_PREFIXES = ("CONFIG_NUMA_BALANCING", "CONFIG_CPU_FREQ_DEFAULT_GOV_", "CONFIG_X86_AMD_PSTATE",
                   "CONFIG_PREEMPT", "CONFIG_TRANSPARENT_HUGEPAGE", "CONFIG_PCIEASPM", "CONFIG_IOMMU_DEFAULT_")
_CONFIG_SET_RE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_CONFIG_UNSET_RE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
_BOOT_ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def parse_kernel_config(text, prefixes=CONFIG_PREFIXES):
    """``{option: value}`` of a kernel ``.config`` (``/boot/config-<release>``, ``/proc/config.gz``)
    for the options starting with one of ``prefixes``: ``"y"``, ``"m"``, the value (quotes removed)
    or ``"n"`` for ``# CONFIG_X is not set``. ``None`` when the text holds no option line at all
    (an empty or foreign file): that is not a kernel configuration.
    """
    if not isinstance(text, str):
        return None
    options = {}
    seen = False
    for line in text.splitlines():
        line = line.strip()
        match = _CONFIG_SET_RE.match(line)
        if match:
            name, value = match.group(1), match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
        else:
            match = _CONFIG_UNSET_RE.match(line)
            if not match:
                continue
            name, value = match.group(1), "n"
        seen = True
        if name.startswith(prefixes):
            options[name] = value
    return options if seen else None


def default_governor(options):
    """The cpufreq governor a kernel built with ``options`` starts a policy with, or ``None``."""
    if not isinstance(options, dict):
        return None
    for name, value in sorted(options.items()):
        if name.startswith("CONFIG_CPU_FREQ_DEFAULT_GOV_") and value == "y":
            return name[len("CONFIG_CPU_FREQ_DEFAULT_GOV_"):].lower()
    return None


def _kernel_config(root, release):
    """``{"source", "options", "default_governor", "reason"}``: the running kernel's build
    configuration from ``/boot/config-<release>``, else ``/proc/config.gz`` (CONFIG_IKCONFIG_PROC)."""
    result = {"source": None, "options": None, "default_governor": None, "reason": None}
    candidates = []
    if release and "/" not in release and release not in (".", ".."):
        candidates.append("/boot/config-" + release)
    candidates.append("/proc/config.gz")
    tried = []
    for path in candidates:
        if not root.exists(path):
            tried.append(path)
            continue
        if path.endswith(".gz"):
            data = root.read_bytes(path, SUBSYSTEM)
            text = None
            if data is not None:
                try:
                    # a kernel config is about 300 KB; read at most 4 MiB of it decompressed
                    with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
                        text = handle.read(4 << 20).decode("utf-8", "replace")
                except (OSError, EOFError, zlib.error) as exc:
                    result["source"] = path
                    result["reason"] = "%s is not a gzip-compressed kernel configuration: %s" % (path, exc)
                    root.error(SUBSYSTEM, path, result["reason"])
                    return result
        else:
            text = root.read_text(path, SUBSYSTEM)
        result["source"] = path
        if text is None:
            result["reason"] = "%s could not be read" % path
            return result
        options = parse_kernel_config(text)
        if options is None:
            result["reason"] = "%s holds no CONFIG_ option lines (empty or not a kernel configuration)" % path
            return result
        result["options"] = options
        result["default_governor"] = default_governor(options)
        return result
    result["reason"] = ("the running kernel's configuration was not found (%s)%s"
                        % (", ".join(tried), "" if release else "; the running release is unknown"))
    return result


def _boot_id(root):
    # optional: snapshots taken before boot ids were read do not hold it
    text = root.read_value("/proc/sys/kernel/random/boot_id", SUBSYSTEM, optional=True)
    if text is None:
        return None
    value = text.strip().lower()
    if not _BOOT_ID_RE.match(value):
        root.error(SUBSYSTEM, "/proc/sys/kernel/random/boot_id", "not a boot id (UUID): %r" % text[:80])
        return None
    return value


def _installed(root):
    found = []
    for name in root.listdir("/lib/modules"):
        if name[:1].isdigit() and root.isdir("/lib/modules/" + name):
            found.append(name)
    for name in root.listdir("/boot", pattern="vmlinuz-*"):
        release = name[len("vmlinuz-"):]
        # EL's rescue image (vmlinuz-0-rescue-<machine-id>) is not an installable release
        if release[:1].isdigit() and "rescue" not in release:
            found.append(release)
    return sort_releases(found)


def gather(root, sysctls=None):
    """The ``kernel`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`).

    ``sysctls``: dotted names of sysctls the catalogue's rules read beyond :data:`sysctls.SYSCTLS`
    (``kernel.sysctl."vm.dirty_ratio"``): each is read too, under its dotted name, in ``sysctl`` (the running
    value) and ``sysctl_persisted`` (the sysctl.d files); bad names are one error and none is read."""
    release = root.read_value("/proc/sys/kernel/osrelease", SUBSYSTEM)
    version = root.read_value("/proc/sys/kernel/version", SUBSYSTEM)

    cmdline_text = read_running_cmdline(root)
    params = parse_cmdline(cmdline_text) if cmdline_text is not None else None
    raw = cmdline_text.strip() if cmdline_text is not None else None

    build = preempt_build(version)
    if version is not None and build is None:
        root.error(SUBSYSTEM, "/proc/sys/kernel/version", "not a kernel version string (no leading '#<build>'): "
                   "%r; the compiled-in preemption model is unknown" % version[:80])
    preempt_arg = cmdline_value(params, "preempt") if params is not None else None
    if preempt_arg is True:
        preempt_arg = None
    # debugfs is root-only (mode 0700): without root the file looks absent, live and in a
    # snapshot alike, so both give preempt.debugfs = null without an error
    debugfs_path = "/sys/kernel/debug/sched/preempt"
    debugfs_text = root.read_text(debugfs_path, SUBSYSTEM, optional=True) if root.exists(debugfs_path) else None
    debugfs = parse_bracketed(debugfs_text) if debugfs_text is not None else None

    sysctl = dict((entry["fact"], root.read_int(proc_path(name), SUBSYSTEM)) for name, entry in SYSCTLS.items())
    problem = name_problem(sysctls) if sysctls is not None else None
    if problem:
        root.error(SUBSYSTEM, "/proc/sys", problem)
    requested = sorted(set(sysctls)) if sysctls and not problem else []
    for name in requested:
        # a missing file is an error: the rule that asked for it is unknown, with the reason
        sysctl[name] = sysctl_value(root.read_value(proc_path(name), SUBSYSTEM))

    listing = dict((directory, root.listdir(directory, pattern="*.conf")) for directory in SYSCTL_DIRS)
    files = []
    for path in sysctl_file_order(listing):
        text = root.read_text(path, SUBSYSTEM, optional=True)
        if text is not None:
            files.append((path, text))
    merged = merge_sysctl(files)
    persisted = dict((key, merged[key]) for key in list(SYSCTLS) + requested if key in merged)

    thp = {}
    for key in ("enabled", "defrag"):
        path = "/sys/kernel/mm/transparent_hugepage/" + key
        text = root.read_text(path, SUBSYSTEM)
        value = parse_bracketed(text) if text is not None else None
        if text is not None and value is None:
            root.error(SUBSYSTEM, path, "no bracketed selection in %r" % text.strip()[:80])
        thp[key] = value

    installed = _installed(root)
    os_text = root.read_text("/etc/os-release", SUBSYSTEM, optional=True)
    if os_text is None:
        os_text = root.read_text("/usr/lib/os-release", SUBSYSTEM)
    os_values = parse_os_release(os_text) if os_text is not None else {}

    return {
        "release": release,
        "version": version,
        "boot_id": _boot_id(root),
        "config": _kernel_config(root, release),
        "preempt": {
            "build": build,
            "cmdline": preempt_arg,
            "debugfs": debugfs,
            "model": preempt_model(build, preempt_arg, debugfs),
        },
        "cmdline": {"raw": raw, "params": params},
        "configured_cmdline": _configured_cmdline(root),
        "sysctl": sysctl,
        "sysctl_persisted": persisted,
        "thp": thp,
        "installed": installed,
        "installed_not_running": [name for name in installed if name != release],
        "os_release": {
            "id": os_values.get("ID"),
            "version_id": os_values.get("VERSION_ID"),
            "id_like": os_values.get("ID_LIKE"),
            "pretty_name": os_values.get("PRETTY_NAME"),
        },
    }
