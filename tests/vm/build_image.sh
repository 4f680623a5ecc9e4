#!/usr/bin/env bash
# Build the test guest: a Debian bookworm minbase root file system in a raw ext4
# image, plus the kernel and initrd taken out of it (QEMU boots them directly, so
# the image needs no partition table and no boot loader on a disk).
#
# usage: build_image.sh OUTDIR
#   OUTDIR must not exist yet; vmctl.py builds into a temporary name and renames
#   it into the cache only when this script succeeded.
# usage: build_image.sh OUTDIR SUITE   (another suite: tests/vm/suite-SUITE.sh, vmctl.py's image-SUITE)  #:suite-hook
# Writes: OUTDIR/base.raw, OUTDIR/vmlinuz, OUTDIR/initrd.img, OUTDIR/id_ed25519{,.pub},
#         OUTDIR/manifest.txt (installed package versions, for the record).
# Needs root (debootstrap, file ownership inside the image), debootstrap, e2fsprogs
# (mkfs.ext4 -d), ssh-keygen, and the Debian mirror this machine's apt uses.
set -euo pipefail

out=${1:?usage: build_image.sh OUTDIR}
suite=bookworm
# The guest's package list: what the harness and the Ansible roles touch inside it.
# grub-pc-bin + grub2-common give /etc/default/grub and update-grub (the fix mode
# writes kernel command-line parameters there) without installing a boot loader.
# python3-yaml, python3-jmespath, python3-jsonschema: what the self_audit role's runner needs
# to judge the host on the host; prometheus-node-exporter serves its textfile (molecule/self_audit).
# mbw: the memory bandwidth tool validate.yml uses in molecule/audit (one small package, no dependencies).
packages=systemd-sysv,udev,kmod,iproute2,openssh-server,python3,pciutils,numactl,linux-image-amd64,initramfs-tools,procps,sudo,grub-pc-bin,grub2-common,python3-yaml,python3-jmespath,python3-jsonschema,prometheus-node-exporter,mbw
# Installed with apt once debootstrap is done (debootstrap's one configure pass of --include packages
# failed on polkitd, a dependency of tuned, configured before its own dependencies):
# tuned, the distribution's tuned for cpu_power's tuned route (molecule/remediate's side effect starts
# it), with dbus and polkitd; disabled below, so no other scenario sees it run.
apt_packages=tuned

die() { echo "build_image.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root: debootstrap and the file ownership inside the image require it"
for tool in debootstrap mkfs.ext4 ssh-keygen; do
    command -v "$tool" >/dev/null || die "$tool not found: apt-get install debootstrap e2fsprogs openssh-client"
done
[ ! -e "$out" ] || die "$out already exists: give a fresh directory"
# Another suite than bookworm: suite-SUITE.sh sets suite, packages and the mirror.  #:suite-hook
# Lines marked with this tag are left out of the bookworm image's cache key (vmctl.py).  #:suite-hook
# shellcheck source=suite-bullseye.sh  #:suite-hook
if [ -n "${2:-}" ]; then . "$(dirname "$0")/suite-$2.sh"; fi  #:suite-hook

# The mirror apt on this machine already uses, so the build needs no other network.
# VM_DEBIAN_MIRROR overrides it.
. "$(dirname "$0")/lib.sh"
mirror=${VM_DEBIAN_MIRROR:-$(apt_mirror_for "$suite")}
[ -n "$mirror" ] || die "no '$suite' entry in /etc/apt/sources.list{,.d}: set VM_DEBIAN_MIRROR to a Debian mirror's URL"

work=$(mktemp -d "${out%/}.work.XXXXXX")
rootfs=$work/rootfs
cleanup() {
    # debootstrap leaves /proc and /sys mounted when it fails half-way.
    for m in proc sys dev/pts dev; do
        if mountpoint -q "$rootfs/$m" 2>/dev/null; then umount -l "$rootfs/$m" || true; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

echo "== debootstrap $suite ($mirror)"
t0=$SECONDS
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 40 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
echo "   debootstrap took $((SECONDS - t0)) s"
# debootstrap unmounts the target's /proc and /sys at its exit but ignores a failure (a process of the
# chroot still busy there): one left mounted (seen once at load ~18) would make `du` below read the
# build machine's /proc and fail, and the image would hold it. Unmount it here, lazily if it is busy.
for fs in proc sys; do
    ! mountpoint -q "$rootfs/$fs" || umount "$rootfs/$fs" || umount -l "$rootfs/$fs"
done

if [ -n "$apt_packages" ]; then
    echo "== apt-get install $apt_packages"
    t0=$SECONDS
    # no service may start inside the chroot (dbus's init script would)
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 755 "$rootfs/usr/sbin/policy-rc.d"
    mount -t proc proc "$rootfs/proc"
    # shellcheck disable=SC2086  # a list of package names
    if ! { chroot "$rootfs" apt-get -q update && DEBIAN_FRONTEND=noninteractive chroot "$rootfs" \
             apt-get -q -y --no-install-recommends install $apt_packages; } >"$work/apt.log" 2>&1; then
        umount "$rootfs/proc"; tail -n 40 "$work/apt.log" >&2; die "apt-get install $apt_packages in the guest failed (log above)"
    fi
    umount "$rootfs/proc"
    rm -f "$rootfs/usr/sbin/policy-rc.d"
    echo "   apt-get install took $((SECONDS - t0)) s"
fi

echo "== configure guest"
echo gpuhost-vm >"$rootfs/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tgpuhost-vm\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs/etc/hosts"
echo '/dev/vda / ext4 defaults,errors=remount-ro 0 1' >"$rootfs/etc/fstab"

# Only the virtio NIC carries the SSH port forward. The e1000e exists for its PCIe
# placement (behind the node-1 expander) and must stay unconfigured, or two
# interfaces in the same slirp subnet would race for the default route.
mkdir -p "$rootfs/etc/systemd/network"
cat >"$rootfs/etc/systemd/network/20-virtio.network" <<'EOF'
[Match]
Driver=virtio_net

[Network]
DHCP=ipv4
EOF
chroot "$rootfs" systemctl enable systemd-networkd.service >/dev/null 2>&1
# Nothing in the guest may wait for or reach the network on its own: the user-mode
# network is restricted and a background apt run would only slow the boot.
# Under TCG every unit and module costs seconds of boot: drop what a headless test
# guest never uses (virtual consoles, wireless regulatory database, PC speaker).
for unit in apt-daily.timer apt-daily-upgrade.timer systemd-networkd-wait-online.service e2scrub_all.timer \
            e2scrub_reap.service fstrim.timer getty-static.service; do
    chroot "$rootfs" systemctl mask "$unit" >/dev/null 2>&1 || true
done
# tuned's package enables tuned.service: every scenario but remediate's side effect expects a guest
# without a running tuned (cpu_power's boot unit). systemd-logind came with dbus (tuned's dependency):
# masked, so SSH logins stay as cheap as in a guest without D-Bus (no user manager per login).
if [ -e "$rootfs/lib/systemd/system/tuned.service" ]; then
    chroot "$rootfs" systemctl disable tuned.service >/dev/null 2>&1
    [ ! -e "$rootfs/etc/systemd/system/multi-user.target.wants/tuned.service" ] || die "tuned.service is still enabled"
fi
chroot "$rootfs" systemctl mask systemd-logind.service >/dev/null 2>&1 || true
printf 'blacklist %s\n' cfg80211 pcspkr iTCO_wdt iTCO_vendor_support joydev >"$rootfs/etc/modprobe.d/gpuhost-vm.conf"

# The initramfs only has to find /dev/vda: the default (MODULES=most) image is
# ~36 MiB, which TCG decompresses slowly. Listing the modules keeps it small;
# 'dep' cannot work here because it inspects the build machine's hardware.
sed -i 's/^MODULES=.*/MODULES=list/' "$rootfs/etc/initramfs-tools/initramfs.conf"
printf '%s\n' virtio_pci virtio_blk ext4 crc32c_generic >>"$rootfs/etc/initramfs-tools/modules"
mount -t proc proc "$rootfs/proc"
chroot "$rootfs" update-initramfs -u -k all >"$work/initramfs.log" 2>&1 \
    || { umount "$rootfs/proc"; cat "$work/initramfs.log" >&2; die "update-initramfs in the guest failed"; }
umount "$rootfs/proc"

# GRUB's configuration packages ship the defaults file but only grub-pc's postinst
# (a boot loader install) would put it in /etc; the fix mode edits it in place.
if [ ! -e "$rootfs/etc/default/grub" ] && [ -e "$rootfs/usr/share/grub/default/grub" ]; then
    cp "$rootfs/usr/share/grub/default/grub" "$rootfs/etc/default/grub"
fi
mkdir -p "$rootfs/boot/grub"
[ -e "$rootfs/etc/default/grub" ] || die "guest has no /etc/default/grub after installing grub2-common"
[ -x "$rootfs/usr/sbin/update-grub" ] || die "guest has no /usr/sbin/update-grub after installing grub2-common"

# Root over SSH with a key generated for this cache entry only (never committed).
ssh-keygen -q -t ed25519 -N '' -C gpuhost-vm-test -f "$work/id_ed25519"
install -d -m 700 "$rootfs/root/.ssh"
install -m 600 "$work/id_ed25519.pub" "$rootfs/root/.ssh/authorized_keys"
cat >"$rootfs/etc/ssh/sshd_config.d/gpuhost-vm.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
EOF
passwd -R "$rootfs" -l root >/dev/null 2>&1 || chroot "$rootfs" passwd -l root >/dev/null

# shellcheck disable=SC2016  # ${Package} is dpkg-query's format, not a shell expansion
chroot "$rootfs" dpkg-query -W -f='${Package} ${Version}\n' >"$work/manifest.txt"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log

echo "== kernel and initrd"
kernel=$(find "$rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | sort -V | tail -n 1)
initrd=$(find "$rootfs/boot" -maxdepth 1 -name 'initrd.img-*' 2>/dev/null | sort -V | tail -n 1)
if [ -z "$kernel" ] || [ -z "$initrd" ]; then
    die "no /boot/vmlinuz-* or /boot/initrd.img-* in the guest: linux-image-amd64 or initramfs-tools did not install"
fi
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
basename "$kernel" >>"$work/manifest.txt"

echo "== mkfs.ext4 -d"
# Room for the guest to write logs, sysctl.d files and an initramfs update.
used_mb=$(du -sm "$rootfs" | cut -f1)
size_mb=$(( used_mb + 1024 ))
mkfs.ext4 -q -F -L gpuhost-root -d "$rootfs" "$work/base.raw" "${size_mb}M" \
    || die "mkfs.ext4 -d failed (e2fsprogs 1.43 or newer is needed for -d)"

mkdir "$out"
mv "$work/base.raw" "$work/vmlinuz" "$work/initrd.img" "$work/id_ed25519" "$work/id_ed25519.pub" "$work/manifest.txt" "$out/"
echo "== image ready in $out (${size_mb} MiB, rootfs ${used_mb} MiB)"
