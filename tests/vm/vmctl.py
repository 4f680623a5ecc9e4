# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build, boot and tear down the QEMU test guests of gpuhost.baseline.

The guests are shaped like the incident host: two NUMA nodes (one CPU socket
each), PCIe endpoints behind root ports, an e1000e behind a pxb-pcie expander
local to node 1, and ACPI C-states/P-states from tests/vm/ssdt.dsl so the guest
kernel runs acpi_idle and acpi-cpufreq. They run under TCG (no /dev/kvm needed;
some machines' KVM cannot run stock guests) with a patched QEMU whose PCIe Device Control
MaxReadReq field is writable.

    vmctl.py build [--only image|image-bullseye|qemu|ssdt]   build what is missing (cached)
    vmctl.py paths [--image SUITE]            print the cached artifacts as JSON
    vmctl.py up NAME --port P [--workdir D] [--image SUITE]   boot a guest, wait for SSH
    vmctl.py down NAME | --all                stop by PID, remove the overlay
    vmctl.py status [--json]                  list guests and whether they run
    vmctl.py ssh NAME [COMMAND...]            run a command in a guest

Artifacts are cached under .cache/vm/<component>-<hash>/ where the hash covers
the files that build the component, so editing a build script, the QEMU patch or
the SSDT rebuilds exactly what it affects. The guest image comes in two Debian suites:
bookworm (component ``image``, the default) and bullseye (``image-bullseye``, Python 3.9 and
kernel 5.10, for the self-audit on an older host); both boot in the same QEMU with the same SSDT. Running guests are registered under
.cache/vm/instances/NAME.json whatever their workdir, so `down --all` finds every
guest this checkout started. The same JSON (instance, address, user, port,
identity_file, plus pid and console_log) is what molecule's delegated driver
needs as instance config.

Standard library only: molecule's create/destroy playbooks call this script
with the controller's Python.
"""

from __future__ import absolute_import, division, print_function

import argparse
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

__metaclass__ = type

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_CACHE = os.path.join(REPO, '.cache', 'vm')

# Each cached component and the repository files its content depends on.
COMPONENTS = {
    'image': ('build_image.sh', 'lib.sh'),
    'image-bullseye': ('build_image.sh', 'lib.sh', 'suite-bullseye.sh'),
    'qemu': ('build_qemu.sh', 'lib.sh', 'qemu-pcie-devctl-writable.patch'),
    'ssdt': ('ssdt.dsl',),
}

# Guest images by Debian suite: the component that builds each. build_image.sh builds bookworm
# when called with OUTDIR alone and another suite when its second argument names it (it sources
# suite-SUITE.sh, which sets the suite, its packages and its mirror).
IMAGES = {'bookworm': 'image', 'bullseye': 'image-bullseye'}
DEFAULT_IMAGE = 'bookworm'

# The lines of build_image.sh that exist only for the other suites carry this tag and are left out
# of the bookworm image's key: they do nothing without a suite argument, so adding a suite does not
# invalidate (and rebuild) a bookworm image that is already cached. Every other line counts.
SUITE_HOOK_TAG = b'#:suite-hook'

# Boot to SSH takes ~25 s on an idle 2-core machine under TCG; a loaded machine
# (builds or other VMs beside it) can make it minutes. GPUHOST_VM_BOOT_TIMEOUT
# raises the default for such places.
DEFAULT_TIMEOUT = int(os.environ.get('GPUHOST_VM_BOOT_TIMEOUT', '180'))
SSH_USER = 'root'
ADDRESS = '127.0.0.1'
# SeaBIOS (seabios package) and linuxboot_dma.bin (qemu-system-data): the patched
# binary is built from the dfsg source, which carries no firmware, and looks in
# its own install prefix, so it is told where Debian keeps them.
FIRMWARE_DIRS = ('/usr/share/seabios', '/usr/share/qemu')


class VmError(Exception):
    """A failure with a message that says what to do; printed without a traceback."""


def cache_root():
    return os.environ.get('GPUHOST_VM_CACHE', DEFAULT_CACHE)


def component_key(name):
    digest = hashlib.sha256()
    for rel in COMPONENTS[name]:
        with open(os.path.join(HERE, rel), 'rb') as handle:
            data = handle.read()
        if name == IMAGES[DEFAULT_IMAGE] and rel == 'build_image.sh':
            data = b''.join(line for line in data.splitlines(True) if SUITE_HOOK_TAG not in line)
        # Name and length framing so moving bytes between files changes the key.
        digest.update(('%s\0%d\0' % (rel, len(data))).encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def component_dir(name):
    return os.path.join(cache_root(), '%s-%s' % (name, component_key(name)))


def image_component(image=None):
    """The cache component of guest image IMAGE (a Debian suite name; None: bookworm)."""
    try:
        return IMAGES[image or DEFAULT_IMAGE]
    except KeyError:
        raise VmError('no guest image %r: choose one of %s' % (image, ', '.join(sorted(IMAGES))))


def artifact_paths(image=None):
    image = component_dir(image_component(image))
    return {
        'base_image': os.path.join(image, 'base.raw'),
        'kernel': os.path.join(image, 'vmlinuz'),
        'initrd': os.path.join(image, 'initrd.img'),
        'identity_file': os.path.join(image, 'id_ed25519'),
        'qemu': os.path.join(component_dir('qemu'), 'qemu-system-x86_64'),
        'ssdt': os.path.join(component_dir('ssdt'), 'ssdt.aml'),
    }


@contextlib.contextmanager
def locked(path):
    """Serialise builds between concurrent vmctl runs (parallel `up`s on a cold cache)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_ssdt(tmp):
    os.mkdir(tmp)
    iasl = shutil.which('iasl')
    if not iasl:
        raise VmError('iasl not found: apt-get install acpica-tools (compiles tests/vm/ssdt.dsl)')
    source = os.path.join(tmp, 'ssdt.dsl')
    shutil.copyfile(os.path.join(HERE, 'ssdt.dsl'), source)
    result = subprocess.run([iasl, '-p', os.path.join(tmp, 'ssdt'), source],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    if result.returncode != 0 or not os.path.exists(os.path.join(tmp, 'ssdt.aml')):
        raise VmError('iasl could not compile tests/vm/ssdt.dsl:\n%s' % result.stdout)


def _run_build_script(script, tmp, log, args=()):
    """Run a build script that builds into TMP, its output going to LOG line by line.

    Returns (exit status, held lines). The script ends with "== <component> ready in TMP": TMP is
    the temporary directory build() renames into place afterwards, so that line is held back and
    build() prints it with the final path once the rename is done.
    """
    proc = subprocess.Popen(['bash', script, tmp] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    held = []
    try:
        for raw in iter(proc.stdout.readline, b''):
            line = raw.decode('utf-8', 'replace')
            if line.startswith('== ') and (' ready in %s' % tmp) in line:
                held.append(line)
            else:
                log.write(line)
                log.flush()
    finally:
        proc.stdout.close()
    return proc.wait(), held


def build(component, log=sys.stdout):
    """Build COMPONENT into its cache directory unless it is there; return the directory."""
    final = component_dir(component)
    if os.path.isdir(final):
        return final
    with locked(os.path.join(cache_root(), '.build-%s.lock' % component)):
        if os.path.isdir(final):  # another vmctl built it while we waited
            return final
        tmp = '%s.tmp.%d' % (final, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        started = time.time()
        ready = []
        try:
            if component == 'ssdt':
                _build_ssdt(tmp)
            else:
                # bash reads a script as it runs: run a private copy so editing the
                # checkout during a long build cannot splice two versions together.
                copies = tmp + '.scripts'
                os.mkdir(copies)
                try:
                    for rel in COMPONENTS[component]:
                        shutil.copy2(os.path.join(HERE, rel), os.path.join(copies, rel))
                    script = os.path.join(copies, COMPONENTS[component][0])
                    # image-SUITE: build_image.sh OUTDIR SUITE
                    suite = [s for s, c in IMAGES.items() if c == component and s != DEFAULT_IMAGE]
                    returncode, ready = _run_build_script(script, tmp, log, suite)
                finally:
                    shutil.rmtree(copies, ignore_errors=True)
                if returncode != 0:
                    log.write(''.join(ready))
                    raise VmError('tests/vm/%s failed (exit %d); its output is above'
                                  % (COMPONENTS[component][0], returncode))
            with open(os.path.join(tmp, 'build-seconds'), 'w') as handle:
                handle.write('%.1f\n' % (time.time() - started))
            os.rename(tmp, final)
            # Said only now, with the path the component has from here on (not the temporary one).
            for line in ready or ['== %s ready in %s\n' % (component, tmp)]:
                log.write(line.replace(tmp, final).rstrip('\n') + ' (built in %.0f s)\n' % (time.time() - started))
            log.flush()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        # Older entries of the same component are dead weight (a raw image is ~1.7 GiB),
        # unless a running guest still uses them (its SSH key, its base image).
        in_use = set()
        for inst in status():
            if inst['running']:
                in_use.update(os.path.dirname(str(inst.get(key, ''))) for key in ('identity_file', 'qemu'))
        # <component>-<key> exactly: image-bullseye-<key> is not an older "image".
        older = re.compile(r'%s-[0-9a-f]{16}\Z' % re.escape(component))
        for entry in os.listdir(cache_root()):
            path = os.path.join(cache_root(), entry)
            if older.match(entry) and path != final and os.path.isdir(path) and path not in in_use:
                shutil.rmtree(path, ignore_errors=True)
    return final


def build_all(only=None, log=sys.stdout):
    """Build ONLY (default: the SSDT, the bookworm image, QEMU); return the artifact paths, those of
    the first image-SUITE component built when one is."""
    for component in (only or ('ssdt', 'image', 'qemu')):
        build(component, log=log)
    images = [suite for component in (only or ()) for suite, name in IMAGES.items() if name == component]
    return artifact_paths(images[0] if images else None)


# --------------------------------------------------------------------------- guests

def registry_dir():
    return os.path.join(cache_root(), 'instances')


def registry_path(name):
    return os.path.join(registry_dir(), '%s.json' % name)


def load_instance(name):
    try:
        with open(registry_path(name)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def all_instances():
    try:
        names = sorted(entry[:-5] for entry in os.listdir(registry_dir()) if entry.endswith('.json'))
    except OSError:
        return []
    return [inst for inst in (load_instance(name) for name in names) if inst]


def _write_json(path, data):
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write('\n')
    os.rename(tmp, path)


def pid_is_guest(pid, pidfile):
    """True if PID is alive and is the QEMU started with PIDFILE (guards against PID reuse)."""
    if not pid:
        return False
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            argv = handle.read().split(b'\0')
        with open('/proc/%d/stat' % pid) as handle:
            state = handle.read().rsplit(')', 1)[1].split()[0]
    except (IOError, OSError):
        return False
    return state != 'Z' and pidfile.encode() in argv


def _reap(pid, timeout=2.0):
    # When the guest is a child of this very process (up failing, tests), collect it. A child
    # caught while exiting (its cmdline already empty, not yet a zombie) is waited for briefly;
    # a live process that is not the guest (PID reuse) or not our child is left alone at once.
    deadline = time.time() + timeout
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except OSError:
            return  # not our child (ECHILD) or already collected
        if done or time.time() > deadline or _running_something(pid):
            return
        time.sleep(0.05)


def _running_something(pid):
    """True if PID is a live process with a command line (not one caught exiting)."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            return bool(handle.read())
    except (IOError, OSError):
        return False


def stop_pid(pid, pidfile, grace=10.0):
    """TERM, then KILL after GRACE seconds. Returns True once the guest is gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if _gone(pid, pidfile):
            return True
        try:
            os.kill(pid, sig)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return True
            raise
        deadline = time.time() + wait
        while time.time() < deadline:
            if _gone(pid, pidfile):
                return True
            time.sleep(0.1)
    return _gone(pid, pidfile)


def _gone(pid, pidfile):
    # Reap after the check too: a child that died in between is a zombie, and is collected here.
    if pid_is_guest(pid, pidfile):
        return False
    _reap(pid)
    return True


def port_is_free(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((ADDRESS, port))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def tail(path, lines=40):
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except (IOError, OSError):
        return '(no %s)' % path
    text = data.decode('utf-8', 'replace').replace('\r', '')
    return '\n'.join(text.splitlines()[-lines:])


def ssh_argv(inst, command=None, connect_timeout=10):
    argv = [
        'ssh', '-i', inst['identity_file'], '-p', str(inst['port']),
        '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
        '-o', 'LogLevel=ERROR', '-o', 'BatchMode=yes', '-o', 'IdentitiesOnly=yes',
        '-o', 'ConnectTimeout=%d' % connect_timeout,
        '%s@%s' % (inst['user'], inst['address']),
    ]
    if command:
        argv.extend(['--'] + list(command))
    return argv


def qemu_argv(qemu, paths, name, port, files, append=''):
    cmdline = 'root=/dev/vda rw console=ttyS0'
    if append:
        cmdline += ' ' + append
    return [
        qemu, '-name', 'gpuhost-vm-%s' % name,
        '-nodefaults', '-no-user-config', '-display', 'none',
    ] + [arg for d in FIRMWARE_DIRS for arg in ('-L', d)] + [
        '-M', 'q35', '-accel', 'tcg,thread=multi', '-cpu', 'max,family=16',
        # Two sockets with one CPU each, each socket its own NUMA node and memory.
        '-smp', '2,sockets=2,cores=1,threads=1', '-m', '2G',
        '-object', 'memory-backend-ram,id=mem0,size=1G',
        '-object', 'memory-backend-ram,id=mem1,size=1G',
        '-numa', 'node,nodeid=0,cpus=0,memdev=mem0',
        '-numa', 'node,nodeid=1,cpus=1,memdev=mem1',
        # CPU power management the guest kernel turns into acpi_idle + acpi-cpufreq.
        '-acpitable', 'file=%s' % paths['ssdt'],
        '-kernel', paths['kernel'], '-initrd', paths['initrd'], '-append', cmdline,
        # Endpoints behind PCIe root ports (modern-only virtio so they are real
        # PCIe functions with an Express capability).
        '-device', 'pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1',
        '-drive', 'if=none,id=rootdisk,file=%s,format=qcow2' % files['overlay'],
        '-device', 'virtio-blk-pci,drive=rootdisk,bus=rp1,disable-legacy=on',
        '-device', 'pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2',
        '-netdev', 'user,id=net0,restrict=on,hostfwd=tcp:%s:%d-:22' % (ADDRESS, port),
        '-device', 'virtio-net-pci,netdev=net0,bus=rp2,disable-legacy=on,romfile=',
        '-device', 'pcie-root-port,id=rp3,bus=pcie.0,chassis=3,slot=3',
        '-drive', 'if=none,id=scratch,file=%s,format=raw' % files['nvme'],
        '-device', 'nvme,drive=scratch,serial=gpuhost-%s,bus=rp3' % name[:12],
        # A host bridge expander local to NUMA node 1: its devices report numa_node 1.
        '-device', 'pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0',
        '-device', 'pcie-root-port,id=rp4,bus=pxb1,chassis=4,slot=4',
        '-netdev', 'user,id=net1,restrict=on',
        '-device', 'e1000e,netdev=net1,bus=rp4,romfile=',
        '-serial', 'file:%s' % files['console_log'],
        '-pidfile', files['pidfile'],
    ]


def ssh_ready(inst):
    try:
        result = subprocess.run(ssh_argv(inst, ['true'], connect_timeout=5),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


def up(name, port, workdir=None, timeout=DEFAULT_TIMEOUT, append='', qemu=None, log=sys.stdout, image=None):
    """Boot guest NAME (guest image IMAGE, a suite name) with SSH on 127.0.0.1:PORT; return its
    instance dict once SSH answers."""
    component = image_component(image)
    if not name or '/' in name or name.startswith('.'):
        raise VmError('bad instance name %r: use letters, digits, - and _' % name)
    old = load_instance(name)
    if old and pid_is_guest(old.get('pid'), old.get('pidfile', '')):
        raise VmError('guest %s already runs (pid %s, port %s): vmctl.py down %s first'
                      % (name, old['pid'], old['port'], name))
    for inst in all_instances():
        if inst['instance'] != name and inst.get('port') == port and pid_is_guest(inst.get('pid'), inst.get('pidfile', '')):
            raise VmError('port %d is taken by guest %s: give each guest its own --port' % (port, inst['instance']))
    if not port_is_free(port):
        raise VmError('%s:%d is in use by another program: choose a free --port' % (ADDRESS, port))

    build_all(('ssdt', component) if qemu else ('ssdt', component, 'qemu'), log=log)
    paths = artifact_paths(image)
    if qemu:
        paths['qemu'] = qemu
    workdir = os.path.abspath(workdir or os.path.join(cache_root(), 'run', name))
    os.makedirs(workdir, exist_ok=True)
    os.makedirs(registry_dir(), exist_ok=True)
    files = {
        'overlay': os.path.join(workdir, '%s.qcow2' % name),
        'nvme': os.path.join(workdir, '%s-nvme.raw' % name),
        'console_log': os.path.join(workdir, '%s-console.log' % name),
        'qemu_log': os.path.join(workdir, '%s-qemu.log' % name),
        'pidfile': os.path.join(workdir, '%s.pid' % name),
    }
    for key in ('overlay', 'nvme', 'console_log', 'qemu_log', 'pidfile'):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(files[key])

    # A fresh copy-on-write overlay per boot: the cached base image never changes.
    result = subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-b', paths['base_image'],
                             '-F', 'raw', files['overlay']],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    if result.returncode != 0:
        raise VmError('qemu-img create failed (apt-get install qemu-utils?):\n%s' % result.stdout)
    with open(files['nvme'], 'wb') as handle:
        handle.truncate(64 << 20)

    argv = qemu_argv(paths['qemu'], paths, name, port, files, append)
    with open(files['qemu_log'], 'wb') as qlog:
        # Own session: the guest outlives this command (molecule's create step) and a
        # Ctrl-C meant for a test runner reaches it only through `down`.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    inst = {
        'instance': name, 'address': ADDRESS, 'user': SSH_USER, 'port': port,
        'identity_file': paths['identity_file'], 'pid': proc.pid,
        'console_log': files['console_log'], 'qemu_log': files['qemu_log'],
        'overlay': files['overlay'], 'nvme_image': files['nvme'], 'pidfile': files['pidfile'],
        'workdir': workdir, 'qemu': paths['qemu'], 'image': image or DEFAULT_IMAGE, 'started': time.time(),
    }
    # Registered before waiting, so `down --all` finds it even if this command dies.
    _write_json(registry_path(name), inst)

    started = time.time()
    deadline = started + timeout
    problem = None
    while True:
        if proc.poll() is not None:
            problem = 'QEMU exited with status %d before SSH answered:\n%s' % (proc.returncode, tail(files['qemu_log'], 20))
            break
        if ssh_ready(inst):
            break
        if time.time() >= deadline:
            problem = 'SSH on %s:%d did not answer within %d s' % (ADDRESS, port, timeout)
            break
        time.sleep(2)
    if problem:
        stop_pid(proc.pid, files['pidfile'])
        _reap(proc.pid)
        _remove_guest_files(inst)
        raise VmError('guest %s failed to boot: %s; the VM (pid %d) was stopped.\nconsole log %s (last 40 lines):\n%s'
                      % (name, problem, proc.pid, files['console_log'], tail(files['console_log'])))
    inst['boot_seconds'] = round(time.time() - started, 1)
    _write_json(registry_path(name), inst)
    _write_json(os.path.join(workdir, '%s.json' % name), inst)
    return inst


def _remove_guest_files(inst):
    for key in ('overlay', 'nvme_image', 'pidfile'):
        with contextlib.suppress(FileNotFoundError, KeyError, TypeError):
            os.unlink(inst[key])
    with contextlib.suppress(FileNotFoundError):
        os.unlink(registry_path(inst['instance']))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(inst.get('workdir', ''), '%s.json' % inst['instance']))


def down(name):
    """Stop guest NAME by PID and remove its overlay; True if it was running."""
    inst = load_instance(name)
    if not inst:
        return False
    was_running = pid_is_guest(inst.get('pid'), inst.get('pidfile', ''))
    if not stop_pid(inst.get('pid'), inst.get('pidfile', '')):
        raise VmError('guest %s (pid %s) survived SIGKILL: check `ps -p %s`' % (name, inst['pid'], inst['pid']))
    _remove_guest_files(inst)
    return was_running


def down_all():
    return [inst['instance'] for inst in all_instances() if down(inst['instance'])]


def status():
    rows = []
    for inst in all_instances():
        row = dict(inst)
        row['running'] = pid_is_guest(inst.get('pid'), inst.get('pidfile', ''))
        rows.append(row)
    return rows


# Molecule's instance config: a YAML list with one mapping per instance. JSON is
# YAML, so the standard library can keep it; only these keys are written.
INSTANCE_CONFIG_KEYS = ('instance', 'address', 'user', 'port', 'identity_file')


def _read_instance_config(path):
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return []
    if not text.strip() or text.strip() in ('[]', '{}', '---', '--- []', '--- {}'):
        return []
    try:
        data = json.loads(text)
    except ValueError:
        raise VmError('%s is not the JSON list vmctl.py writes: remove it (molecule reset) and retry' % path)
    if isinstance(data, dict):  # molecule may seed an empty mapping
        data = [data] if data else []
    return data


def update_instance_config(path, name, inst=None):
    """Replace NAME's entry in molecule's instance config PATH (remove it when INST is None)."""
    entries = [entry for entry in _read_instance_config(path) if entry.get('instance') != name]
    if inst is not None:
        entries.append(dict((key, inst[key]) for key in INSTANCE_CONFIG_KEYS))
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    _write_json(path, entries)


# --------------------------------------------------------------------------- CLI

def _terminated(signum, _frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='vmctl.py', description=__doc__.split('\n\n', maxsplit=1)[0])
    sub = parser.add_subparsers(dest='cmd')
    sub.required = True
    p_build = sub.add_parser('build', help='build the guest image, patched QEMU and SSDT (cached)')
    p_build.add_argument('--only', action='append', choices=sorted(COMPONENTS))
    p_paths = sub.add_parser('paths', help='print the cached artifact paths as JSON')
    p_paths.add_argument('--image', choices=sorted(IMAGES), help='guest image (Debian suite; default %s)' % DEFAULT_IMAGE)
    p_up = sub.add_parser('up', help='boot a guest and wait until SSH answers')
    p_up.add_argument('name')
    p_up.add_argument('--port', type=int, required=True, help='loopback port forwarded to the guest sshd')
    p_up.add_argument('--workdir', help='where the overlay, console log and instance JSON go')
    p_up.add_argument('--timeout', type=int, default=DEFAULT_TIMEOUT,
                      help='seconds to wait for SSH (default %d; env GPUHOST_VM_BOOT_TIMEOUT)' % DEFAULT_TIMEOUT)
    p_up.add_argument('--append', default='', help='extra kernel command-line arguments')
    p_up.add_argument('--qemu', help='QEMU binary to use instead of the patched build')
    p_up.add_argument('--image', choices=sorted(IMAGES), help='guest image (Debian suite; default %s)' % DEFAULT_IMAGE)
    p_up.add_argument('--instance-config', help="molecule's instance config file to add this guest to")
    p_down = sub.add_parser('down', help='stop guests by PID and remove their overlays')
    p_down.add_argument('name', nargs='?')
    p_down.add_argument('--all', action='store_true')
    p_down.add_argument('--instance-config', help="molecule's instance config file to remove the guest(s) from")
    p_status = sub.add_parser('status', help='list registered guests')
    p_status.add_argument('--json', action='store_true')
    p_ssh = sub.add_parser('ssh', help='run a command in a guest over SSH')
    p_ssh.add_argument('name')
    p_ssh.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    try:
        if args.cmd == 'build':
            # A SIGTERM (tools/vm_test.sh's guard stopping a build it runs in the background) unwinds
            # like an error, so build() removes its temporary directory instead of leaving it in the cache.
            signal.signal(signal.SIGTERM, _terminated)
            # Build progress on stderr, so stdout stays the JSON a playbook can parse.
            print(json.dumps(build_all(args.only, log=sys.stderr), indent=2, sort_keys=True))
        elif args.cmd == 'paths':
            paths = artifact_paths(args.image)
            missing = [key for key, path in paths.items() if not os.path.exists(path)]
            print(json.dumps(paths, indent=2, sort_keys=True))
            if missing:
                print('not built yet: %s (run vmctl.py build)' % ', '.join(sorted(missing)), file=sys.stderr)
                return 1
        elif args.cmd == 'up':
            inst = up(args.name, args.port, args.workdir, args.timeout, args.append, args.qemu, log=sys.stderr,
                      image=args.image)
            if args.instance_config:
                update_instance_config(args.instance_config, args.name, inst)
            print(json.dumps(inst, indent=2, sort_keys=True))
        elif args.cmd == 'down':
            if args.all == bool(args.name):
                parser.error('down takes either NAME or --all')
            names = [inst['instance'] for inst in all_instances()] if args.all else [args.name]
            stopped = down_all() if args.all else [args.name] if down(args.name) else []
            if args.instance_config:
                config = args.instance_config
                if args.all:
                    names = [entry.get('instance') for entry in _read_instance_config(config)]
                for name in names:
                    update_instance_config(config, name)
            print('stopped: %s' % (' '.join(stopped) or 'nothing was running'))
        elif args.cmd == 'status':
            rows = status()
            if args.json:
                print(json.dumps(rows, indent=2, sort_keys=True))
            else:
                for row in rows:
                    state = 'running' if row['running'] else 'stopped'
                    print('%-16s pid %-8s port %-6s %s' % (row['instance'], row['pid'], row['port'], state))
        elif args.cmd == 'ssh':
            inst = load_instance(args.name)
            if not inst:
                raise VmError('no guest named %s: vmctl.py status lists them' % args.name)
            command = args.command[1:] if args.command[:1] == ['--'] else args.command
            return subprocess.call(ssh_argv(inst, command))
    except VmError as exc:
        print('vmctl.py: %s' % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
