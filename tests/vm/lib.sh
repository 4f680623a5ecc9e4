# shellcheck shell=bash
# Shared by build_image.sh and build_qemu.sh (sourced, not run).
# Both build only from the Debian mirror this machine's apt already uses, so the
# VM builds need no network beyond what apt has.

# Print "URI SUITE" for every binary (deb) entry apt is configured with, from both
# the deb822 *.sources files and the one-line *.list format.
apt_deb_entries() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '
            BEGIN { RS=""; FS="\n" }
            {
                uris=""; suites=""; deb=0; enabled=1
                for (i = 1; i <= NF; i++) {
                    line=$i
                    if (line ~ /^URIs:/) { uris=line; sub(/^URIs:[ \t]*/, "", uris) }
                    if (line ~ /^Suites:/) { suites=line; sub(/^Suites:[ \t]*/, "", suites) }
                    if (line ~ /^Types:/ && line ~ /[ \t]deb([ \t]|$)/) deb=1
                    if (line ~ /^Enabled:[ \t]*no/) enabled=0
                }
                if (!deb || !enabled) next
                nu=split(uris, u, /[ \t]+/); ns=split(suites, s, /[ \t]+/)
                for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) if (u[a] != "" && s[b] != "") print u[a], s[b]
            }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk '$1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                print $i, $(i + 1)
            }' "$f"
    done
}

# The mirror URI serving SUITE (first match), or nothing.
apt_mirror_for() {
    apt_deb_entries | awk -v suite="$1" '$2 == suite { print $1; exit }'
}
