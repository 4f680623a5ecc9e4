#!/usr/bin/env bash
# Build qemu-system-x86_64 from Debian's own qemu source with one change:
# tests/vm/qemu-pcie-devctl-writable.patch makes the PCIe Device Control fields
# MaxReadReq, MaxPayload, Relaxed Ordering and No Snoop writable, as on real
# hardware. Stock QEMU hard-wires them read-only, so a guest could never show a
# MaxReadReq fix taking effect.
#
# usage: build_qemu.sh OUTDIR
#   OUTDIR must not exist yet (vmctl.py builds into a temporary name and renames
#   it into the cache on success).
# Writes: OUTDIR/qemu-system-x86_64, OUTDIR/source-version.txt.
# Needs root only when build dependencies are missing (installed with apt-get).
set -euo pipefail

out=${1:?usage: build_qemu.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
patch_file=$here/qemu-pcie-devctl-writable.patch
. "$here/lib.sh"

die() { echo "build_qemu.sh: $*" >&2; exit 1; }
[ ! -e "$out" ] || die "$out already exists: give a fresh directory"
[ -r "$patch_file" ] || die "missing $patch_file"

# Build dependencies of a TCG + slirp x86_64 system emulator, and what apt-get
# source needs to unpack a Debian source package.
deps="build-essential dpkg-dev ninja-build meson pkg-config libglib2.0-dev libslirp-dev libpixman-1-dev libfdt-dev zlib1g-dev python3 patch"
missing=""
for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || die "missing build dependencies:$missing (apt-get install them as root)"
    echo "== apt-get install$missing"
    # shellcheck disable=SC2086  # $missing is a space-separated list of package names, split on purpose
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=900 --no-install-recommends $missing >/dev/null \
        || die "apt-get install$missing failed"
fi

work=$(mktemp -d "${out%/}.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A private apt state holding only deb-src entries for the mirrors this machine
# already uses: the system's sources and lists stay untouched.
apt_dir=$work/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_deb_entries | awk -v kr="$keyring" '
    $2 ~ /^bookworm(-updates|-security)?$/ && !seen[$0]++ { print "deb-src [signed-by=" kr "] " $1 " " $2 " main" }
' >"$apt_dir/sources.list"
[ -s "$apt_dir/sources.list" ] || die "no bookworm entries in /etc/apt/sources.list{,.d} to derive deb-src lines from"
apt_opts=(
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Sandbox::User=root"
)

echo "== apt-get source qemu"
t0=$SECONDS
apt-get "${apt_opts[@]}" -q update >"$work/apt-update.log" 2>&1 \
    || { cat "$work/apt-update.log" >&2; die "apt-get update of the deb-src entries failed"; }
(cd "$work" && apt-get "${apt_opts[@]}" -q source --only-source qemu >"$work/apt-source.log" 2>&1) \
    || { tail -n 20 "$work/apt-source.log" >&2; die "apt-get source qemu failed"; }
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'qemu-*' | head -n 1)
[ -n "$src" ] || die "apt-get source qemu unpacked no qemu-* directory"
version=$(cd "$src" && dpkg-parsechangelog -S Version)
echo "   qemu $version, fetched in $((SECONDS - t0)) s"

echo "== patch"
patch -d "$src" -p1 --forward --batch <"$patch_file" \
    || die "$patch_file does not apply to Debian qemu $version: refresh it against hw/pci/pcie.c"

echo "== configure"
t0=$SECONDS
mkdir "$src/build-gpuhost"
# Everything off but what the test guests use: TCG, user-mode networking (SSH port
# forward), and the built-in q35 devices (pcie-root-port, pxb-pcie, e1000e, nvme,
# virtio). QEMU 7.2 insists on libfdt for x86_64 (the microvm machine); the dfsg
# source has no dtc copy, so it comes from libfdt-dev. Firmware (SeaBIOS,
# linuxboot_dma.bin) comes from the Debian packages at run time (vmctl.py passes
# -L /usr/share/seabios -L /usr/share/qemu): the dfsg source has no prebuilt blobs.
(cd "$src/build-gpuhost" && ../configure \
    --target-list=x86_64-softmmu \
    --without-default-features \
    --enable-tcg --enable-slirp --enable-fdt=system \
    --disable-docs --disable-werror --disable-install-blobs \
    >"$work/configure.log" 2>&1) \
    || { tail -n 40 "$work/configure.log" >&2; die "configure failed (log tail above)"; }
echo "   configure took $((SECONDS - t0)) s"

echo "== ninja qemu-system-x86_64"
t0=$SECONDS
ninja -C "$src/build-gpuhost" -j "$(nproc)" qemu-system-x86_64 >"$work/ninja.log" 2>&1 \
    || { tail -n 40 "$work/ninja.log" >&2; die "ninja failed (log tail above)"; }
echo "   build took $((SECONDS - t0)) s"

mkdir "$out"
install -m 755 "$src/build-gpuhost/qemu-system-x86_64" "$out/qemu-system-x86_64"
echo "$version" >"$out/source-version.txt"
"$out/qemu-system-x86_64" --version | head -n 1
echo "== qemu ready in $out"
