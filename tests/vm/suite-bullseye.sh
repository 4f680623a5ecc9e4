# shellcheck shell=bash
# Sourced by build_image.sh OUTDIR bullseye (vmctl.py's image-bullseye component): the Debian 11
# guest of molecule/self_audit_debian11, which proves the self-audit runs on an older host with
# the standard library alone: Python 3.9, kernel 5.10, systemd 247.
#
# Its packages: what the harness and the self-audit scenario touch, nothing more. The bookworm
# image's python3-yaml, python3-jmespath and python3-jsonschema are left out on purpose (the
# scenario asserts that none of them imports); numactl and grub-pc-bin too (no scenario on this
# guest runs the fixes). grub2-common stays: it gives /etc/default/grub, which the audit reads
# (kernel command-line rules) and build_image.sh checks for.
# shellcheck disable=SC2034  # suite and packages are read by build_image.sh, which sources this file
suite=bullseye
# shellcheck disable=SC2034
packages=systemd-sysv,udev,kmod,iproute2,openssh-server,python3,pciutils,linux-image-amd64,initramfs-tools,procps,sudo,grub2-common,prometheus-node-exporter
# nothing installed after debootstrap: no tuned here (only molecule/remediate's bookworm guest runs it)
# shellcheck disable=SC2034
apt_packages=

# The mirror: the one apt on this machine uses for bullseye, else the one it uses for bookworm (a
# Debian archive serves every suite it carries). VM_DEBIAN_MIRROR still overrides both.
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [ -z "${VM_DEBIAN_MIRROR:-}" ] && [ -z "$(apt_mirror_for "$suite")" ]; then
    VM_DEBIAN_MIRROR=$(apt_mirror_for bookworm)
fi
