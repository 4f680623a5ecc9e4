# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing the report set into a report directory: the refusals, the manifest, staging under a
lock and publishing (docs/report.md, "The report directory").

:func:`write_reports` writes ``report.json`` and renders each view from it as stored (``views.py``
for HTML and Markdown, ``views_machine.py`` for JUnit and Prometheus); every file is written to a
temporary name first and renamed into place only when all exist, and only files the previous
manifest names are ever removed.
"""

from __future__ import absolute_import, division, print_function

import errno
import hashlib
import json
import os
import re
import stat
import uuid

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history, metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import DirectoryLock, FileRefused, clip, loads_json
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import (
    FORMAT_FILES, FORMATS, ReportError, compact_document, dumps_document, expand_document, loads_stored,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import (
    HOST_PAGES_DIR, TEMPLATES, iter_host_pages, render_html, render_markdown, report_view,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views_machine import (
    iter_csv, iter_junit, iter_prometheus)

__metaclass__ = type


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

#: the template views, rendered whole from the stored document; report.json is written as stored,
#: junit.xml streamed host by host (views_machine.iter_junit), metrics.prom merged with the hosts a
#: --limit run skipped (metrics.merge_metrics): each of those has its own path in _write_set
RENDERERS = {
    "md": render_markdown,
    "html": render_html,
}


class ReportDirError(ReportError):
    """The report directory is refused, or the set could not be written there: ``str()`` is one line
    naming the directory and what to do (``baseline_report`` fails the task with it)."""


#: The manifest of the last set written into a report directory: which files this tool wrote there
#: (the only ones it ever removes), each with its size and SHA-256, and the run's ``generation``. It
#: is also the marker that the directory is a report directory (docs/report.md, "The report directory").
MANIFEST = ".gpuhost-report.json"
MANIFEST_FORMAT = "gpuhost.baseline report set"
#: Real paths a report directory may not be (exact match, after links are resolved), with the
#: controller user's home directory: the tool runs as root, and these hold files of everything else.
SYSTEM_DIRECTORIES = (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib",
    "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin",
    "/usr/sbin", "/usr/share", "/usr/src", "/var", "/var/cache", "/var/lib", "/var/log", "/var/mail", "/var/run",
    "/var/spool", "/var/tmp",
    # macOS controllers
    "/Applications", "/Library", "/System", "/Users", "/Volumes", "/private", "/private/etc", "/private/tmp",
    "/private/var",
)
#: The report files' names (the manifest, and an earlier version's directory, may hold only these).
REPORT_FILES = tuple(name for dummy, name in FORMAT_FILES)
#: A host page in ``hosts/`` (``host_page_names``: never a path, never a hidden file).
_PAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.(?:html|md)\Z")
#: The temporary name of a report file, a page or a history file left by a run that was killed
#: (``files.write_temporary``: ``.<name>.<random>``).
_TEMPORARY = re.compile(r"^\.(?:%s|\.gpuhost-report\.json|[A-Za-z0-9_-][A-Za-z0-9._-]*\.(?:html|md|jsonl))\.[A-Za-z0-9_]{6,}\Z"
                        % "|".join(re.escape(name) for name in REPORT_FILES))
#: Foreign names a refusal quotes at most.
_QUOTED = 5


def _system_directory(directory):
    """The real path of ``directory`` when it is one of :data:`SYSTEM_DIRECTORIES` or the home
    directory, else ``None``."""
    real = os.path.realpath(directory)
    refused = set()
    home = os.path.expanduser("~")
    for path in SYSTEM_DIRECTORIES + ((home,) if os.path.isabs(home) else ()):
        refused.add(os.path.normpath(path))
        refused.add(os.path.realpath(path))
    return real if real in refused else None


def _foreign(directory):
    """``(count, first names)`` of what ``directory`` (no manifest) holds that this tool never writes
    there: anything but the report files, a ``hosts/`` of page files, a directory of ``*.jsonl``
    drift histories and the temporary files of a killed run. Nothing is followed or read."""
    count, names = 0, []
    with os.scandir(directory) as entries:
        for entry in entries:
            if _ours(entry):
                continue
            count += 1
            if len(names) < _QUOTED:
                names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    return count, names


def _ours(entry):
    name = entry.name
    if entry.is_dir(follow_symlinks=False):
        # host pages, or a directory of drift histories kept inside the report directory
        wanted = _PAGE_NAME.match if name == HOST_PAGES_DIR else history.is_history_file
        with os.scandir(entry.path) as inner:  # stops at the first name of another kind
            return all((item.is_file(follow_symlinks=False) and (wanted(item.name) or item.name == files.LOCK_NAME))
                       or _TEMPORARY.match(item.name) for item in inner)
    if entry.is_symlink():
        return False
    # the lock file: held by this run while it checks, or left by a run that was killed
    return name in REPORT_FILES or name == files.LOCK_NAME or bool(_TEMPORARY.match(name))


def _previous_set(directory):
    """Relative names of the files the manifest of the previous run says this tool wrote (only the
    report files and ``hosts/<page>``: any other name in it is never touched), ``set()`` for a
    directory without a manifest that holds nothing foreign. Raises :class:`ReportDirError`."""
    path = os.path.join(directory, MANIFEST)
    try:
        text = files.read_text(path)
    except FileNotFoundError:
        count, names = _foreign(directory)
        if count:
            more = " and %d more" % (count - len(names)) if count > len(names) else ""
            raise ReportDirError(
                "refused to write the reports into %s: it holds files this tool did not write (%s%s) and no report "
                "manifest (%s) marking it as a report directory; give gpuhost_report_dir (report_dir) an empty or new "
                "directory of its own" % (clip(directory), ", ".join(clip(n, 80) for n in names), more, MANIFEST))
        return set()
    except OSError as exc:  # FileRefused: a link, a FIFO, a device, too large
        raise ReportDirError("refused to write the reports into %s: the report manifest %s cannot be read (%s); "
                             "look at it, and remove it to write there again" % (clip(directory), MANIFEST, clip(exc)))
    try:
        manifest = loads_json(text)
        listed = manifest["files"]
        names = list(listed) + list(manifest.get("previous") or [])
        if not (isinstance(listed, dict) and all(isinstance(v, dict) for v in listed.values())
                and all(isinstance(n, str) for n in names) and isinstance(manifest.get("complete"), bool)):
            raise ValueError("not a manifest of this tool")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ReportDirError("refused to write the reports into %s: the report manifest %s is damaged (%s); look at "
                             "it, and remove it to write there again" % (clip(directory), MANIFEST, clip(exc)))
    pages = HOST_PAGES_DIR + "/"
    return set(n for n in names if n in REPORT_FILES or (n.startswith(pages) and _PAGE_NAME.match(n[len(pages):])))


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _check_pages_dir(directory):
    """``hosts/`` is a directory of its own or absent: a link is never followed, refused with anything else."""
    path = os.path.join(directory, HOST_PAGES_DIR)
    st = _lstat(path)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise ReportDirError(
            "refused to write the reports into %s: %s is %s, not the directory of host pages this tool writes (it is "
            "never followed); remove it" % (clip(directory), clip(path), kind))


class _Staged:
    """The files of one set at their temporary names, renamed into place only when all exist."""

    def __init__(self, directory):
        self.directory = directory
        self.files = []  # (temporary, path, relative name)
        self.entries = {}  # relative name -> {"bytes", "sha256"}
        self.made_pages_dir = False

    def add(self, relative, text, sync=True):
        """Stage ``text``: a string, or an iterable of strings written as they come (a streamed view)."""
        path = os.path.join(self.directory, relative)
        digest = hashlib.sha256()
        size = [0]

        def counted(chunks):
            for chunk in chunks:
                data = chunk.encode("utf-8")
                digest.update(data)
                size[0] += len(data)
                yield chunk

        tmp = files.write_temporary(path, counted([text] if isinstance(text, str) else text), sync)
        self.files.append((tmp, path, relative))
        self.entries[relative] = {"bytes": size[0], "sha256": digest.hexdigest()}

    def pages_dir(self):
        path = os.path.join(self.directory, HOST_PAGES_DIR)
        if _lstat(path) is None:
            os.mkdir(path, 0o755)
            self.made_pages_dir = True

    def check_targets(self):
        """A directory where a file goes is refused before any file is renamed."""
        for dummy, path, relative in self.files:
            st = _lstat(path)
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise ReportDirError("refused to write the reports into %s: %s is a directory, not a file this tool "
                                     "writes; remove it" % (clip(self.directory), clip(relative)))

    def discard(self):
        for tmp, dummy, dummy2 in self.files:
            files.discard(tmp)
        self.files = []
        if self.made_pages_dir:
            try:
                os.rmdir(os.path.join(self.directory, HOST_PAGES_DIR))
            except OSError:
                pass


def _manifest(generation, generated, entries, complete, previous=()):
    document = {"format": MANIFEST_FORMAT, "schema": 1, "generation": generation, "generated": generated,
                "complete": complete, "files": dict(sorted(entries.items()))}
    if previous:
        document["previous"] = sorted(previous)
    return json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"


def stored_text(report):
    """``report.json``'s text of a document :func:`report.build_report` made (stored as schema 3:
    :func:`report.compact_document`, one line per rule and per finding: :func:`report.dumps_document`),
    each host compacted when its lines are written."""
    return dumps_document(compact_document(report, lazy=True))


def write_reports(report, directory, formats=None, template_dir=None):
    """Write report.json of ``report`` (a document :func:`report.build_report` made) and each
    requested view into ``directory``; return ``{format: path}``. :func:`write_stored` with its text."""
    return write_stored(stored_text(report), directory, formats, template_dir)[0]


def write_stored(text, directory, formats=None, template_dir=None):
    """Write ``text`` (:func:`stored_text`) as report.json and each requested view rendered from it
    into ``directory``; return ``({format: path}, document)``, the document the views rendered: the
    one ``text`` stores, expanded (:func:`report.expand_document`, equal to the one it was made from)
    a host at a time: its ``hosts`` a read-only mapping that expands a host each time it is read.
    A caller that drops its document once it has the text (``baseline_report``) never holds two
    copies of the fleet while the views are rendered, nor the fleet's findings with their rule text.
    The views read the hosts from ``text`` itself (:func:`report.loads_stored`): the writer holds
    the text, about a fifth of the stored document's objects, and one host's objects at a time.

    The directory must be new, empty, or a report directory (it holds :data:`MANIFEST`, or only the
    names this tool writes); a system directory, a directory holding other files, a link in place of
    ``hosts/``, a FIFO, link or oversized file in place of ``metrics.prom`` are refused with
    :class:`ReportDirError` before any file is written there. Under a lock on the directory every file
    is written to a temporary name first; only when all exist are they renamed into place
    (:func:`_publish`: between two manifests, the host pages the previous manifest names and this run
    did not write removed before the last one). A failure before the renames (a full disk, a renderer
    error) removes the temporary files and leaves the previous set exactly as it was.
    """
    formats = list(FORMATS if formats is None else formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ReportError("unknown report format(s) %s; choose from %s" % (", ".join(map(str, unknown)), ", ".join(FORMATS)))
    system = _system_directory(directory)
    if system:
        raise ReportDirError("refused to write the reports into %s: it is a system directory (%s); give "
                             "gpuhost_report_dir (report_dir) a directory of the reports' own, for example "
                             "/srv/gpuhost-reports" % (clip(directory), clip(system)))
    try:
        os.makedirs(directory, exist_ok=True)  # two runs creating it at once both go on
        with DirectoryLock(directory):
            return _write_set(text, directory, formats, template_dir)
    except (FileExistsError, NotADirectoryError):
        raise ReportDirError("cannot write the reports into %s: it is not a directory" % clip(directory))
    except FileRefused as exc:  # DirectoryLock: a file in its place
        raise ReportDirError("cannot write the reports into %s: %s" % (clip(directory), clip(exc)))
    except OSError as exc:
        raise ReportDirError("cannot write the reports into %s: %s; check that the directory is writable by the "
                             "controller user" % (clip(directory), _reason(exc)))


def _reason(exc):
    """``No space left on device (ENOSPC)``: an OSError in a message, without the temporary file's name."""
    if getattr(exc, "errno", None) in errno.errorcode and exc.strerror:
        return "%s (%s)" % (exc.strerror, errno.errorcode[exc.errno])
    return clip(exc)


def _write_set(text, directory, formats, template_dir):
    """:func:`write_stored` under the directory lock."""
    previous = _previous_set(directory)
    _check_pages_dir(directory)
    files_named = dict(FORMAT_FILES)
    paths = {"json": os.path.join(directory, files_named["json"])}
    staged = _Staged(directory)
    try:
        staged.add(files_named["json"], text)
        # Views render from the document as stored, so they can never show more than report.json;
        # its hosts are read from the text, each decoded when it is read (report.loads_stored)
        compact = loads_stored(text)
        del text
        for name, iterate in (("junit", iter_junit), ("csv", iter_csv)):
            if name in formats:
                # streamed host by host from the stored form (views_machine.iter_junit, iter_csv)
                paths[name] = os.path.join(directory, files_named[name])
                staged.add(files_named[name], iterate(compact))
        # each host expanded when a view reads it (report.HostsRead): the stored document is held
        # once, the rule text of one host's findings at a time
        stored = expand_document(compact, lazy=True)
        del compact
        # one view model for report.html, report.md and the host pages
        view = report_view(stored) if any(name in formats for name in TEMPLATES) else None
        for name in FORMATS:
            if name in ("json", "junit", "csv") or name not in formats:
                continue
            paths[name] = os.path.join(directory, files_named[name])
            if name == "prom":
                # the fleet file keeps the hosts a --limit run skipped (metrics.merge_metrics); read
                # bounded, never through a link, never blocking on a FIFO, and its text held only
                # when it has such a host
                try:
                    existing = metrics.existing_to_merge(stored, paths[name])
                except FileRefused as exc:
                    raise ReportDirError(
                        "refused to write the reports into %s: %s (it is read to keep the series of the hosts a "
                        "--limit run skipped); look at it, and remove it to write there again"
                        % (clip(directory), clip(exc)))
                # the series lines of the fleet held, their text written a family at a time
                output = iter_prometheus(stored, existing)
                del existing
            else:
                output = RENDERERS[name](stored, template_dir=template_dir, view=view)
            staged.add(files_named[name], output)
            del output
        _stage_host_pages(staged, stored, [f for f in ("html", "md") if f in formats], template_dir, view)
        staged.check_targets()
    except OSError as exc:
        staged.discard()
        raise ReportDirError("cannot write the reports into %s: %s; nothing there was replaced, the previous reports "
                             "are as they were" % (clip(directory), _reason(exc)))
    except BaseException:
        staged.discard()
        raise
    _publish(staged, directory, previous, stored["generated"])
    return paths, stored


def _stage_host_pages(staged, stored, formats, template_dir=None, view=None):
    """The per-host pages of a fleet above :data:`INLINE_HOSTS` hosts, as ``hosts/<stem>.<ext>``
    (without an fsync each: they are views, regenerated from report.json at will)."""
    if not formats:
        return
    # rendered and written one page at a time, a host's pages together: the pages of the fleet
    # are never held together, and a host is read from report.json once for all its pages
    for relative, text in iter_host_pages(stored, formats, template_dir, view=view):  # "hosts/<stem>.<ext>"
        staged.pages_dir()
        staged.add(relative, text, sync=False)


def _publish(staged, directory, previous, generated):
    """Rename the staged set into place: a manifest that names this run's files and the previous
    run's (``complete: false``) first, then each file, then the previous run's host pages that this
    run did not write are removed (``hosts/`` with them when it is left empty), and last the manifest
    of this run alone (``complete: true``). Killed half-way, the manifest says the set is not
    complete and names every file the next run may remove."""
    generation = uuid.uuid4().hex
    manifest_path = os.path.join(directory, MANIFEST)
    stale = sorted(n for n in previous if n not in staged.entries and n.startswith(HOST_PAGES_DIR + "/"))
    try:
        files.atomic_write(manifest_path, _manifest(generation, generated, staged.entries, False, previous))
    except BaseException as exc:
        staged.discard()
        if isinstance(exc, OSError):
            raise ReportDirError("cannot write the reports into %s: %s; nothing there was replaced, the previous "
                                 "reports are as they were" % (clip(directory), _reason(exc)))
        raise
    staged.made_pages_dir = False  # from here on it holds pages of this run
    try:
        while staged.files:
            tmp, path, dummy = staged.files[0]
            files.publish(tmp, path)
            staged.files.pop(0)
        _remove_pages(directory, [n[len(HOST_PAGES_DIR) + 1:] for n in stale], keep_dir=any(
            n.startswith(HOST_PAGES_DIR + "/") for n in staged.entries))
        files.atomic_write(manifest_path, _manifest(generation, generated, staged.entries, True))
    except BaseException as exc:
        staged.discard()
        if isinstance(exc, OSError):
            raise ReportDirError("cannot finish putting the reports in place in %s: %s; the files there may come "
                                 "from two runs until the next run completes (%s says \"complete\": false)"
                                 % (clip(directory), _reason(exc), MANIFEST))
        raise


def _remove_pages(directory, names, keep_dir):
    """Remove the pages ``names`` from ``hosts/``, opened without following a link (each name a
    plain file name there, a directory in its place left alone), then ``hosts/`` when it is empty
    and no page of this run is in it."""
    path = os.path.join(directory, HOST_PAGES_DIR)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return
    try:
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=fd)
        empty = not keep_dir and not os.listdir(fd)
    finally:
        os.close(fd)
    if empty:
        try:
            os.rmdir(path)
        except OSError:  # something appeared in it meanwhile: it stays
            pass
