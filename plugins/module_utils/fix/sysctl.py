# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fix logic of ``gpuhost.baseline.kernel_sysctl``: runtime value and a sysctl.d file, decided apart.

Pure functions (:func:`check_key`, :func:`check_value`, :func:`runtime_value`,
:func:`render_conf`, :func:`effective_value`) decide; :func:`apply` reads, decides and writes
through a :class:`fix.base.Host`. "Persisted" always means the value systemd-sysctl would
apply at boot after its precedence rules over every ``sysctl.d`` directory
(``facts.kernel.sysctl_file_order``/``merge_sysctl``), not just the content of our own file: a file
that sorts after ours and sets the same key makes ours ineffective, and the result says so.
"""

from __future__ import absolute_import, division, print_function

import posixpath

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import (
    FixError, file_diff, printable, to_bytes, to_text)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import (
    SYSCTL_CONF, SYSCTL_DIRS, merge_sysctl, normalize_sysctl_key, parse_sysctl_conf, sysctl_file_order)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import SYSCTLS, proc_path

__metaclass__ = type

DEFAULT_FILE = "/etc/sysctl.d/90-gpuhost-baseline.conf"

#: The keys this module may set, with the range the kernel accepts: the managed sysctls (facts/sysctls.py).
ALLOWED = dict((name, entry["range"]) for name, entry in SYSCTLS.items())

HEADER = (
    "# Managed by Ansible (gpuhost.baseline.kernel_sysctl): the keys below are set by the GPU host baseline.\n"
    "# Edits to these keys are overwritten on the next run; put other settings in a file of your own.\n"
)


def check_key(key):
    """The normalised key, or :class:`FixError` for a key outside :data:`ALLOWED`."""
    normal = normalize_sysctl_key((key or "").strip())
    if normal not in ALLOWED:
        raise FixError("sysctl key %s is not managed by gpuhost.baseline.kernel_sysctl: it only sets %s; use "
                       "ansible.posix.sysctl for other keys" % (printable(key), ", ".join(sorted(ALLOWED))), key=key)
    return normal


def check_value(key, value):
    """``value`` as the decimal text the kernel prints, or :class:`FixError` when out of range."""
    low, high = ALLOWED[key]
    try:
        number = int(str(value).strip(), 10)
    except ValueError:
        number = None
    if number is None or isinstance(value, bool) or not low <= number <= high:
        raise FixError("value %s for %s is invalid: expected an integer from %d to %d"
                       % (printable(str(value)), key, low, high), key=key)
    return str(number)


def runtime_value(text):
    """Text of a ``/proc/sys`` integer file -> its decimal value as text, or ``None`` for garbage."""
    if text is None:
        return None
    text = text.strip()
    try:
        return str(int(text, 10))
    except ValueError:
        return None


def same_value(a, b):
    """sysctl values compare as integers when both are integers (``"00"`` == ``"0"``)."""
    if a is None or b is None:
        return a is b
    try:
        return int(a.strip(), 10) == int(b.strip(), 10)
    except ValueError:
        return a.strip() == b.strip()


def conf_value(text, key):
    """Value that ``text`` (one sysctl.d file) gives ``key``, or ``None``."""
    return parse_sysctl_conf(text or "").get(key)


def render_conf(text, key, value):
    """New content of our sysctl.d file with ``key = value``; every other byte kept.

    A missing or empty file gets :data:`HEADER` and the line. Otherwise the first line that
    sets ``key`` (in any spelling systemd accepts, ``-`` prefix included) gets the new value in
    place of the old, later lines for the key are dropped (the last one would win), and a key
    the file lacks is appended.
    """
    if not text:
        return HEADER + "%s = %s\n" % (key, value)
    lines = text.splitlines(True)
    out = []
    done = False
    for line in lines:
        stripped = line.strip()
        if stripped and stripped[0] not in "#;" and "=" in stripped:
            name = stripped.partition("=")[0].strip()
            if name.startswith("-"):
                name = name[1:].strip()
            if normalize_sysctl_key(name) == key:
                if done:
                    continue
                done = True
                eq = line.index("=")
                rest = line[eq + 1:]
                lead = rest[:len(rest) - len(rest.lstrip(" \t"))]
                body = rest.rstrip("\r\n")
                tail = body[len(body.rstrip(" \t")):] + rest[len(body):]
                line = line[:eq + 1] + lead + value + tail
        out.append(line)
    if not done:
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append("%s = %s\n" % (key, value))
    return "".join(out)


def effective_value(files, key):
    """``(value, file)`` systemd-sysctl ends up with for ``key`` from ``[(path, text)]`` in order."""
    entry = merge_sysctl(files).get(key)
    if entry is None:
        return None, None
    return entry["value"], entry["file"]


def check_sysctl_file(path):
    """Our file must be one systemd-sysctl reads: ``<sysctl.d dir>/<name>.conf``."""
    directory, name = posixpath.split(path or "")
    if path == SYSCTL_CONF or (directory in SYSCTL_DIRS and name.endswith(".conf") and not name.startswith(".")):
        return path
    raise FixError("sysctl_file %s is not read at boot: use a NAME.conf in one of %s"
                   % (printable(path), ", ".join(SYSCTL_DIRS)), sysctl_file=path)


# -- acting --------------------------------------------------------------------------------

def _sysctl_files(host, ours, our_text):
    """``[(path, text)]`` in systemd-sysctl order, with our file as it is or would be."""
    listing = dict((directory, host.listdir(directory, pattern="*.conf")) for directory in SYSCTL_DIRS)
    directory, name = posixpath.split(ours)
    if our_text is not None and directory in listing and name not in listing[directory]:
        listing[directory] = sorted(listing[directory] + [name])
    files = []
    for path in sysctl_file_order(listing):
        if path == ours:
            text = our_text
        else:
            data = host.read_file(path)
            text = to_text(data)
        if text is not None:
            files.append((path, text))
    return files


def apply(host, key, value, runtime=True, persist=True, sysctl_file=DEFAULT_FILE, diff=False):
    """Decide and (outside check mode) make the change; returns the module result.

    Order: the runtime write first, then the file. A runtime write the kernel refuses
    (read-only ``/proc/sys`` in a container, EINVAL) fails before any file is touched; a
    failing file write undoes the runtime write (the caller calls ``host.rollback``).
    """
    key = check_key(key)
    value = check_value(key, value)
    sysctl_file = check_sysctl_file(sysctl_file)
    warnings = []
    result = {"key": key, "value": value, "sysctl_file": sysctl_file, "runtime": runtime, "persist": persist}

    path = proc_path(key)
    raw = host.read_file(path)
    runtime_before = runtime_value(to_text(raw))
    if raw is not None and runtime_before is None and runtime:
        raise FixError("current value of %s is %s, not an integer: this is not a sysctl file of a running kernel "
                       "(a corrupt snapshot?); nothing was changed" % (path, printable(raw)), key=key)
    if raw is None and runtime:
        absent = SYSCTLS[key]["absent_when"]
        raise FixError("%s does not exist: this kernel has no %s%s; set runtime: false to only persist it"
                       % (path, key, " (%s)" % absent if absent else ""), key=key)
    runtime_change = runtime and not same_value(runtime_before, value)

    our_before = to_text(host.read_file(sysctl_file))
    files_before = _sysctl_files(host, sysctl_file, our_before)
    persisted_before, source_before = effective_value(files_before, key)
    ours_value = conf_value(our_before, key)
    # our file decides when it sets the key (a later file that overrides it is reported, and
    # rewriting ours would not help); otherwise write only when the boot value is wrong
    if ours_value is not None:
        persist_change = persist and not same_value(ours_value, value)
    else:
        persist_change = persist and not same_value(persisted_before, value)
    our_after = render_conf(our_before, key, value) if persist_change else our_before
    files_after = _sysctl_files(host, sysctl_file, our_after) if persist_change else files_before
    persisted_after, source_after = effective_value(files_after, key)

    overridden_by = None
    if persist and source_after is not None and source_after != sysctl_file and not same_value(persisted_after, value):
        overridden_by = source_after
        warnings.append("%s sets %s = %s and is applied after %s, so the value persisted here is ineffective at boot: "
                        "remove the key from %s or give sysctl_file a name that sorts after it"
                        % (source_after, key, printable(persisted_after), sysctl_file, source_after))

    result.update({
        "changed": bool(runtime_change or persist_change),
        "runtime_before": runtime_before,
        "runtime_after": value if runtime_change else runtime_before,
        "persisted_before": persisted_before,
        "persisted_after": persisted_after,
        "persisted_file": source_after,
        "overridden_by": overridden_by,
        "warnings": warnings,
    })
    if diff:
        entries = []
        if runtime_change:
            entries.append({"before_header": path + " (runtime)", "after_header": path + " (runtime)",
                            "before": "%s = %s\n" % (key, runtime_before), "after": "%s = %s\n" % (key, value)})
        if persist_change:
            entries.append(file_diff(sysctl_file, our_before, our_after))
        result["diff"] = entries

    if host.check_mode:
        return result
    if runtime_change:
        host.write_attr(path, value)
        result["runtime_after"] = runtime_value(to_text(host.read_file(path)))
    if persist_change:
        host.write_file(sysctl_file, to_bytes(our_after), mode=0o644)  # explicit: not the umask's
    return result


#: The module's own options (kernel_sysctl; host_fix's steps with module kernel_sysctl), besides root and backup.
ARGUMENT_SPEC = dict(
    key=dict(type="str", required=True, no_log=False),
    value=dict(type="str", required=True),
    runtime=dict(type="bool", default=True),
    persist=dict(type="bool", default=True),
    sysctl_file=dict(type="path", default=DEFAULT_FILE),
)
REQUIRED_ONE_OF = []


def apply_params(host, p, diff=False):
    """:func:`apply` with the module's validated options ``p``."""
    return apply(host, p["key"], p["value"], p["runtime"], p["persist"], p["sysctl_file"], diff)
