# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fix logic of ``gpuhost.baseline.kernel_cmdline``: edit the configured kernel command line.

The boot loader is detected from files (``facts.kernel.detect_bootloader``), never guessed:

* ``systemd-boot`` (Proxmox and plain systemd-boot): ``/etc/kernel/cmdline`` is edited in
  place, then ``proxmox-boot-tool refresh`` (or ``kernel-install add`` for the running kernel)
  copies it into the boot entries;
* ``grub``: ``GRUB_CMDLINE_LINUX_DEFAULT`` (and ``GRUB_CMDLINE_LINUX`` where a managed key
  already lives) is edited in the file that assigns it last (``/etc/default/grub`` or a
  ``/etc/default/grub.d/*.cfg``), keeping its quoting and every other byte, then
  ``update-grub`` (Debian family), ``grub2-mkconfig -o /boot/grub2/grub.cfg`` (EL) or
  ``proxmox-boot-tool refresh`` regenerates the menu;
* ``bls`` (EL with BLS entries): ``grubby --update-kernel=ALL --args=... --remove-args=...``
  edits the entries; the module writes no file itself.

Pure functions: :func:`parse_request`, :func:`cmdline_tokens`, :func:`edit_cmdline`,
:func:`edit_grub_files`, :func:`parse_bls_entry`,
:func:`reboot_required`, :func:`grub_update_argv`. :func:`apply` acts through a
:class:`fix.base.Host`.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import (
    FixError, file_diff, printable, to_bytes, to_text)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import (
    KERNEL_SPACE, cmdline_value, cmdline_word_spans, detect_bootloader, grub_cmdline, grub_config, grub_d_names,
    parse_cmdline, parse_os_release, sort_releases, split_cmdline)

__metaclass__ = type

BOOTLOADERS = ("grub", "systemd-boot", "bls")
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUB_DEFAULT = "/etc/default/grub"
GRUB_D = "/etc/default/grub.d"
BLS_DIR = "/boot/loader/entries"
GRUBENV = "/boot/grub2/grubenv"
PROXMOX_UUIDS = "/etc/kernel/proxmox-boot-uuids"
LINUX_VAR = "GRUB_CMDLINE_LINUX"
DEFAULT_VAR = "GRUB_CMDLINE_LINUX_DEFAULT"

_SPACE = KERNEL_SPACE


def _norm(key):
    # the kernel compares parameter names with '-' and '_' equal (parameq)
    return key.replace("-", "_")


# -- request ---------------------------------------------------------------------------------

def _check_param(key, value):
    if not key or any(ch in key for ch in _SPACE + '"='):
        raise FixError("kernel parameter name %s is invalid: names have no spaces, quotes or '='" % printable(key))
    if value is not True and ('"' in value or "\n" in value or "\x00" in value):
        raise FixError("value %s of kernel parameter %s cannot be written to a command line: it contains a double "
                       "quote or a line break" % (printable(value), key))


def parse_request(add, remove):
    """``add`` (dict, list of ``key=value``/flags, or one string) and ``remove`` (keys) ->
    ``([(key, value)], [key])``; ``value`` is ``True`` for a flag.

    A key given twice, or both added and removed, is a :class:`FixError`.
    """
    adds = []
    if isinstance(add, dict):
        for key, value in add.items():
            if value is False:
                raise FixError("add: %s is false: list it under remove to drop it" % key)
            adds.append((str(key).strip(), True if value is True or value is None else str(value)))
    elif isinstance(add, (list, tuple, str)):
        items = [add] if isinstance(add, str) else add
        for item in items:
            if not isinstance(item, str):
                raise FixError("add: %s is not a key=value string or a flag" % printable(str(item)))
            params, init = split_cmdline(item)
            if init or len(params) != 1:
                raise FixError("add: %s is not one key=value parameter or flag (give a list with one item each)"
                               % printable(item))
            adds.append(params[0])
    elif add is not None:
        raise FixError("add must be a dict or a list of key=value strings and flags")
    removes = []
    for key in remove or []:
        key = str(key).strip()
        if "=" in key:
            raise FixError("remove: %s has a value: remove takes parameter names only (every occurrence goes)"
                           % printable(key))
        _check_param(key, True)
        removes.append(key)
    seen = {}
    for key, value in adds:
        _check_param(key, value)
        if _norm(key) in seen:
            raise FixError("add: kernel parameter %s is given twice" % key)
        seen[_norm(key)] = key
    for key in removes:
        if _norm(key) in seen:
            raise FixError("kernel parameter %s is both in add and in remove" % key)
    return adds, removes


def render_param(key, value):
    if value is True:
        return key
    if any(ch in value for ch in _SPACE):
        return '%s="%s"' % (key, value)
    return "%s=%s" % (key, value)


def managed_keys(adds, removes):
    return [key for key, _value in adds] + list(removes)


# -- command line text -------------------------------------------------------------------------

def cmdline_tokens(text):
    """Words of a command line as the kernel splits them: ``[(start, end, key, value, init)]``.

    ``key``/``value`` come from ``facts.kernel.split_cmdline`` of the word (``None`` key for a word
    that is no parameter); ``init`` is true for a bare ``--`` and every word after it, which
    the kernel hands to init.
    """
    tokens = []
    init = False
    for start, end in cmdline_word_spans(text):
        word = text[start:end]
        if word == "--":
            init = True
        key = value = None
        if not init:
            params, _rest = split_cmdline(word)
            if len(params) == 1:
                key, value = params[0]
        tokens.append((start, end, key, value, init))
    return tokens


def edit_cmdline(text, adds, removes):
    """``text`` with ``adds`` set and ``removes`` dropped; every other byte kept.

    A key in ``adds`` takes the new value in place of its first occurrence, later occurrences
    go; a key not present is appended (before a bare ``--``). Names match with ``-`` and ``_``
    equal, as in the kernel.
    """
    text = text or ""
    want = dict((_norm(key), (key, value)) for key, value in adds)
    drop = set(_norm(key) for key in removes)
    kept = []
    previous = 0
    seen = set()
    leading = None
    for start, end, key, value, init in cmdline_tokens(text):
        sep, word = text[previous:start], text[start:end]
        previous = end
        if leading is None:
            leading = sep
        if key is not None and not init:
            name = _norm(key)
            if name in drop:
                continue
            if name in want:
                if name in seen:
                    continue
                seen.add(name)
                new_key, new_value = want[name]
                if value != new_value:
                    word = render_param(new_key, new_value)
        kept.append([sep, word, init])
    tail = text[previous:]
    new = [[" ", render_param(key, value), False] for key, value in adds if _norm(key) not in seen]
    position = len(kept)
    for index, piece in enumerate(kept):
        if piece[2]:
            position = index
            break
    if new and position < len(kept):
        # keep the original separator before "--" and put one space after the new words
        new[0][0], kept[position][0] = kept[position][0], " "
    pieces = kept[:position] + new + kept[position:]
    if pieces:
        pieces[0][0] = leading or ""
    return "".join(sep + word for sep, word, _init in pieces) + tail


def reboot_required(running, configured, keys):
    """Whether the running command line differs from the configured one for ``keys``.

    ``running``/``configured`` are ``parse_cmdline`` dicts; ``None`` running -> ``None``.
    """
    if running is None:
        return None
    return any(cmdline_value(running, key) != cmdline_value(configured or {}, key) for key in keys)


def managed_values(params, keys):
    """The managed keys' values in ``params`` (``null`` when absent), for the result."""
    if params is None:
        return None
    return dict((key, cmdline_value(params, key)) for key in keys)


# -- /etc/default/grub ---------------------------------------------------------------------------

_WORD_STOP = _SPACE + ";&|<>()"


def _word_end(text, i):
    """End of the shell word starting at ``i`` (``None`` for an unterminated quote)."""
    n = len(text)
    while i < n and text[i] not in _WORD_STOP:
        ch = text[i]
        if ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                return None
            i = close + 1
        elif ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                return None
            i += 1
        elif ch == "\\":
            i += 2
        else:
            i += 1
    return min(i, n)


_BARE_SAFE = re.compile(r"^[A-Za-z0-9_.,:=/+@%^-]*$")


def unquote_value(raw, name):
    """``(value, style)`` of an assignment word we can rewrite, style ``double``/``single``/``bare``.

    Words built from several quoted parts or using expansions are refused: rewriting them
    could change what the shell evaluates.
    """
    if len(raw) >= 2 and raw[0] == "'" and raw.find("'", 1) == len(raw) - 1:
        return raw[1:-1], "single"
    if len(raw) >= 2 and raw[0] == '"' and _word_end(raw, 0) == len(raw) and raw.endswith('"'):
        inner = raw[1:-1]
        if "$" in inner or "`" in inner:
            raise FixError("%s=%s uses shell expansion: edit it by hand or drop the expansion" % (name, raw[:80]))
        # inside double quotes a backslash only escapes \ " $ ` and newline
        value = re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), inner)
        if '"' in raw[1:-1].replace('\\"', ""):
            raise FixError("%s=%s is built from several quoted parts: write it as one quoted string first"
                           % (name, raw[:80]))
        return value, "double"
    if _BARE_SAFE.match(raw):
        return raw, "bare"
    raise FixError("%s=%s is not a single quoted string: write it as %s=\"...\" first" % (name, raw[:80], name))


def quote_value(value, style):
    if style == "single" and "'" not in value:
        return "'%s'" % value
    if style == "bare" and _BARE_SAFE.match(value):
        return value
    return '"%s"' % re.sub(r'([\\"$`])', r"\\\1", value)


def refuse_shell(path, problems):
    """The :class:`FixError` for a GRUB defaults file whose command line depends on the shell:
    the first problem of ``path`` (``[(line, reason)]``) named, the other lines listed."""
    line, reason = problems[0]
    more = sorted(set(other for other, _reason in problems[1:] if other != line))
    return FixError("cannot edit %s safely: line %d %s (the effective value depends on the shell%s): edit it by hand"
                    % (path, line, reason, "; also line %s" % ", ".join(str(other) for other in more) if more else ""),
                    changed=False)


def edit_grub_files(files, adds, removes):
    """Edit the GRUB command-line variables over ``[(path, text)]`` in the order grub-mkconfig
    sources them (``/etc/default/grub``, then ``grub.d/*.cfg``).

    Returns ``{"files": {path: new_text}, "before": raw cmdline, "after": raw cmdline}``.
    A managed key already in ``GRUB_CMDLINE_LINUX`` is set or removed there; the rest goes to
    ``GRUB_CMDLINE_LINUX_DEFAULT``. Each variable is edited at the assignment in effect: the last
    plain assignment of the last file that assigns it (a line is appended to the first file when
    nobody assigns it).

    Refused (:class:`FixError`, nothing to write) when a file's effective value cannot be known
    without running it (``facts.shell.static_assignments``: ``+=``, an assignment inside
    if/case/a loop/a function or after ``&&``/``||``/``;``/``|``, ``.``/``source``, ``eval``, ...;
    the message names the file and the line), when the assignment in effect uses an expansion
    (rewriting it could change what the shell evaluates), and when the edited files would not
    evaluate to the planned command line.
    """
    config = grub_config(files)
    if config["problems"]:
        path = config["problems"][0][0]
        raise refuse_shell(path, [(line, reason) for other, line, reason in config["problems"] if other == path])
    where = {}
    current = {}
    styles = {}
    for name in (LINUX_VAR, DEFAULT_VAR):
        if name in config["assignments"]:
            index, line, start, end = config["assignments"][name]
            path, text = files[index]
            where[name] = (index, (start, end))
            try:
                current[name], styles[name] = unquote_value(text[start:end], name)
            except FixError as exc:
                raise FixError("cannot edit %s safely: line %d: %s" % (path, line, exc.msg), changed=False)
        else:
            current[name], styles[name] = "", "double"

    in_linux = set(_norm(key) for _s, _e, key, _v, init in cmdline_tokens(current[LINUX_VAR]) if key and not init)
    in_default = set(_norm(key) for _s, _e, key, _v, init in cmdline_tokens(current[DEFAULT_VAR]) if key and not init)
    linux_adds = [(k, v) for k, v in adds if _norm(k) in in_linux]
    default_adds = [(k, v) for k, v in adds if _norm(k) in in_default or _norm(k) not in in_linux]
    new = {
        LINUX_VAR: edit_cmdline(current[LINUX_VAR], linux_adds, removes),
        DEFAULT_VAR: edit_cmdline(current[DEFAULT_VAR], default_adds, removes),
    }
    texts = dict(files)
    order = [path for path, _text in files]
    # edit from the end of a file backwards so that earlier spans stay valid
    edits = sorted(((where[name][0], where[name][1], name) for name in where if new[name] != current[name]),
                   key=lambda item: (item[0], -item[1][0]))
    for index, (start, end), name in edits:
        path = order[index]
        text = texts[path]
        texts[path] = text[:start] + quote_value(new[name], styles[name]) + text[end:]
    for name in (DEFAULT_VAR, LINUX_VAR):
        if name not in where and new[name] != current[name]:
            path = order[0]
            text = texts[path]
            if text and not text.endswith("\n"):
                text += "\n"
            texts[path] = text + "%s=%s\n" % (name, quote_value(new[name], "double"))
    before = grub_cmdline(current)
    after = grub_cmdline(new)
    # what the shell will end with, read back from the edited text: the edit must be the one in effect
    check = grub_config([(path, texts[path]) for path in order])
    if config["raw"] != before or check["raw"] != after:
        raise FixError("cannot edit the GRUB defaults safely: the files evaluate to %s before and %s after the edit, "
                       "not %s and %s as planned; nothing was changed, edit them by hand"
                       % (printable(config["raw"]), printable(check["raw"]), printable(before),
                          printable(after)), changed=False)
    return {"files": dict((path, texts[path]) for path in order if texts[path] != dict(files)[path]),
            "before": before, "after": after}


def grub_update_argv(os_release, exists):
    """The command that regenerates grub.cfg on this distribution, decided from files."""
    if exists(PROXMOX_UUIDS):
        return ["proxmox-boot-tool", "refresh"]
    ids = ("%s %s" % (os_release.get("ID") or "", os_release.get("ID_LIKE") or "")).split()
    if exists("/etc/debian_version") or "debian" in ids or "ubuntu" in ids:
        return ["update-grub"]
    if exists("/etc/redhat-release") or set(ids) & set(("rhel", "fedora", "centos", "suse", "opensuse")):
        return ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]
    if exists("/boot/grub2/grub.cfg"):
        return ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]
    if exists("/boot/grub/grub.cfg"):
        return ["grub-mkconfig", "-o", "/boot/grub/grub.cfg"]
    raise FixError("cannot tell how grub.cfg is generated here: no /etc/debian_version, /etc/redhat-release, "
                   "/boot/grub2/grub.cfg or /boot/grub/grub.cfg; run grub-mkconfig by hand")


# -- BLS entries ------------------------------------------------------------------------------------

def parse_grubenv(text):
    """``/boot/grub2/grubenv`` -> ``{name: value}`` (``#`` padding and comments ignored)."""
    values = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        name, _sep, value = line.partition("=")
        values[name] = value
    return values


def parse_bls_entry(text, grubenv=None):
    """A BLS entry -> ``{"version", "options", "unknown"}``.

    ``options`` joins every ``options`` line and expands ``$name`` from grubenv. GRUB expands
    an undefined variable to nothing (EL9's ``$tuned_params`` when tuned sets none), so do we,
    except ``$kernelopts``: on EL8 it holds the whole command line, and without it the
    configured line is unknown (``options`` is then ``None``).
    """
    version = None
    options = []
    for line in (text or "").splitlines():
        key, _sep, value = line.strip().partition(" ")
        if key == "version":
            version = value.strip()
        elif key == "options":
            options.append(value.strip())
    joined = " ".join(options)
    unknown = []

    def expand(match):
        name = match.group(1) or match.group(2)
        if name in (grubenv or {}):
            return grubenv[name]
        if name == "kernelopts":
            unknown.append(name)
        return ""

    expanded = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", expand, joined)
    return {"version": version, "options": None if unknown else " ".join(expanded.split()), "unknown": unknown}


def bls_needs_change(params, adds, removes):
    """grubby edits by key: an entry needs it when an added key has another value or a removed key is set."""
    for key, value in adds:
        if cmdline_value(params, key) != value:
            return True
    return any(cmdline_value(params, key) is not None for key in removes)


# -- acting -------------------------------------------------------------------------------------------

def detect(host):
    def exists(path):
        if path == BLS_DIR + "/*.conf":
            return bool(host.listdir(BLS_DIR, pattern="*.conf"))
        return host.exists(path)
    return detect_bootloader(exists)


def _running(host):
    data = host.read_file("/proc/cmdline")
    return parse_cmdline(to_text(data)) if data is not None else None


def _os_release(host):
    data = host.read_file("/etc/os-release")
    if data is None:
        data = host.read_file("/usr/lib/os-release")
    return parse_os_release(to_text(data)) if data is not None else {}


def _systemd_boot(host, adds, removes):
    data = host.read_file(KERNEL_CMDLINE)
    if data is None:
        raise FixError("%s does not exist: systemd-boot/Proxmox take the command line from it; create it with the "
                       "parameters of /proc/cmdline that belong there (root=...) and run again" % KERNEL_CMDLINE)
    before = to_text(data)
    if not cmdline_tokens(before):
        raise FixError("%s is empty: the boot entries would get no root= parameter; put the full command line "
                       "in it first, nothing was changed" % KERNEL_CMDLINE)
    after = edit_cmdline(before, adds, removes)
    if host.exists(PROXMOX_UUIDS):
        argv = ["proxmox-boot-tool", "refresh"]
    else:
        release = host.read_attr("/proc/sys/kernel/osrelease", optional=True)
        argv = ["kernel-install", "add", release, "/boot/vmlinuz-%s" % release] if release else None
    return {"files": {KERNEL_CMDLINE: after} if after != before else {}, "originals": {KERNEL_CMDLINE: before},
            "before": " ".join(before.split()), "after": " ".join(after.split()), "argv": argv}


def _grub(host, adds, removes):
    files = []
    data = host.read_file(GRUB_DEFAULT)
    if data is None:
        raise FixError("%s does not exist: this is not a GRUB host, or GRUB is configured elsewhere" % GRUB_DEFAULT)
    files.append((GRUB_DEFAULT, to_text(data)))
    for name in grub_d_names(host.listdir(GRUB_D, pattern="*.cfg")):
        path = GRUB_D + "/" + name
        extra = host.read_file(path)
        if extra is not None:
            files.append((path, to_text(extra)))
    plan = edit_grub_files(files, adds, removes)
    argv = grub_update_argv(_os_release(host), host.exists)
    return {"files": plan["files"], "originals": dict(files), "before": plan["before"], "after": plan["after"],
            "argv": argv}


def _bls_entries(host):
    env_data = host.read_file(GRUBENV)
    grubenv = parse_grubenv(to_text(env_data)) if env_data is not None else None
    entries = []
    for name in host.listdir(BLS_DIR, pattern="*.conf"):
        path = BLS_DIR + "/" + name
        entry = parse_bls_entry(to_text(host.read_file(path)), grubenv)
        if entry["options"] is None:
            raise FixError("%s: options use $%s, which %s does not define: the configured command line is unknown"
                           % (path, ", $".join(entry["unknown"]), GRUBENV))
        entry["path"] = path
        entries.append(entry)
    if not entries:
        raise FixError("no BLS entries in %s: bootloader bls needs them (grubby edits them)" % BLS_DIR)
    return entries


def _default_entry(entries):
    versions = [entry["version"] for entry in entries if entry["version"]]
    newest = sort_releases(versions)[-1] if versions else None
    for entry in entries:
        if entry["version"] == newest:
            return entry
    return entries[-1]


def apply(host, add=None, remove=None, bootloader="auto", diff=False):
    """Decide and (outside check mode) edit the configured command line; returns the result."""
    adds, removes = parse_request(add, remove)
    keys = managed_keys(adds, removes)
    detected = detect(host)
    kind = detected if bootloader == "auto" else bootloader
    if kind is None:
        raise FixError("cannot tell which boot loader this host uses: none of %s (with %s or /boot/efi/loader), "
                       "%s or BLS entries in %s exist; set bootloader: grub, systemd-boot or bls if you know it; "
                       "nothing was changed" % (KERNEL_CMDLINE, PROXMOX_UUIDS, GRUB_DEFAULT, BLS_DIR),
                       bootloader=None)
    warnings = []
    if bootloader != "auto" and detected is not None and detected != bootloader:
        warnings.append("bootloader is set to %s but the files say %s: editing the %s configuration, which this "
                        "host may not boot from" % (bootloader, detected, bootloader))
    result = {"bootloader": kind, "detected_bootloader": detected, "warnings": warnings}
    running = _running(host)

    if kind == "bls":
        entries = _bls_entries(host)
        needing = [entry["path"] for entry in entries if bls_needs_change(parse_cmdline(entry["options"]), adds, removes)]
        default = _default_entry(entries)
        before_raw = default["options"]
        after_raw = edit_cmdline(before_raw, adds, removes) if needing else before_raw
        plan = {"files": {}, "originals": {}, "before": before_raw, "after": after_raw, "argv": None}
        if needing:
            argv = ["grubby", "--update-kernel=ALL"]
            if adds:
                argv.append("--args=%s" % " ".join(render_param(k, v) for k, v in adds))
            if removes:
                argv.append("--remove-args=%s" % " ".join(removes))
            plan["argv"] = argv
        result["entries_to_update"] = needing
        changed = bool(needing)
    elif kind == "systemd-boot":
        plan = _systemd_boot(host, adds, removes)
        changed = bool(plan["files"])
    else:
        plan = _grub(host, adds, removes)
        changed = bool(plan["files"])

    configured_before = parse_cmdline(plan["before"])
    configured_after = parse_cmdline(plan["after"])
    result.update({
        "changed": changed,
        "source": {"grub": GRUB_DEFAULT, "systemd-boot": KERNEL_CMDLINE, "bls": BLS_DIR}[kind],
        "config_files": sorted(plan["files"]) if kind != "bls" else list(result.get("entries_to_update", [])),
        "configured_before": configured_before,
        "configured_after": configured_after,
        "running": managed_values(running, keys),
        "reboot_required": reboot_required(running, configured_after, keys),
    })
    if diff:
        if kind == "bls":
            result["diff"] = [file_diff(default["path"] + " (options, edited by grubby)", before_raw + "\n",
                                        after_raw + "\n")] if changed else []
        else:
            result["diff"] = [file_diff(path, plan["originals"][path], text) for path, text in sorted(plan["files"].items())]
    if not changed:
        return result
    if plan["argv"] is None:
        warnings.append("no command regenerates the boot entries here (no %s and no running release): the new "
                        "command line is used when the next kernel is installed" % PROXMOX_UUIDS)
    if not host.check_mode:
        for path, text in sorted(plan["files"].items()):
            host.write_file(path, to_bytes(text), mode=0o644)  # explicit: not the umask's
    if plan["argv"]:
        # only listed in check mode or on a snapshot root
        host.run(plan["argv"], "the boot configuration was not regenerated; the edited file is put back so that "
                 "the next run tries again")
    if host.check_mode:
        return result
    if kind == "bls" and host.live:
        # grubby wrote the entries: report what they say now
        result["configured_after"] = parse_cmdline(_default_entry(_bls_entries(host))["options"])
        result["reboot_required"] = reboot_required(running, result["configured_after"], keys)
    return result


#: The module's own options (kernel_cmdline; host_fix's steps with module kernel_cmdline), besides root and backup.
ARGUMENT_SPEC = dict(
    add=dict(type="raw"),
    remove=dict(type="list", elements="str"),
    bootloader=dict(type="str", default="auto", choices=["auto", "grub", "systemd-boot", "bls"]),
)
REQUIRED_ONE_OF = [["add", "remove"]]


def apply_params(host, p, diff=False):
    """:func:`apply` with the module's validated options ``p``."""
    return apply(host, p["add"], p["remove"], p["bootloader"], diff)
