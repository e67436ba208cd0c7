# shellcheck shell=bash
# Shared helpers for zeropin's shell tools. Source it; it defines functions only.

# The repository root, whatever the caller's working directory.
ZP_ROOT=$(CDPATH="" cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
ZP_BUILD="${ZP_BUILD:-$ZP_ROOT/build}"

die() {
	echo "$(basename -- "$0"): error: $*" >&2
	exit 1
}

warn() {
	echo "$(basename -- "$0"): warning: $*" >&2
}

log() {
	echo "$(basename -- "$0"): $*" >&2
}

# Print the ABI recorded for a kernel series in tests/lab/kernels.
recorded_abi() {
	awk -v s="$1" '$1 == s { print $2 }' "$ZP_ROOT/tests/lab/kernels"
}

# The Debian suite a kernel series comes from: tests/lab/kernels' fourth
# field (sid for upstream's newest), empty for this machine's own sources.
recorded_suite() {
	awk -v s="$1" '$1 == s { print $4 }' "$ZP_ROOT/tests/lab/kernels"
}

# apt options for a private apt state of SUITE under build/kernels/apt/
# (its lists fetched once), so that another suite's packages can be
# downloaded without touching this machine's apt state; nothing for an
# empty SUITE (this machine's own sources). The options hold no spaces.
kernel_apt_opts() {
	local suite="$1" dir mirror opts
	[ -n "$suite" ] || return 0
	dir="$ZP_BUILD/kernels/apt/$suite"
	if [ ! -f "$dir/sources.list" ]; then
		mirror=$(debian_mirror) || die "no Debian mirror in this machine's apt sources"
		mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
		printf 'deb %s %s main\ndeb-src %s %s main\n' "$mirror" "$suite" "$mirror" "$suite" >"$dir/sources.list"
	fi
	opts="-o Dir::Etc::SourceList=$dir/sources.list -o Dir::Etc::SourceParts=/dev/null"
	opts+=" -o Dir::State::Lists=$dir/lists -o Dir::Cache=$dir/cache"
	if ! ls "$dir/lists/"*_Packages* >/dev/null 2>&1; then
		log "fetching $suite's package lists (private apt state in $dir)"
		# shellcheck disable=SC2086 # the options split into words
		apt-get $opts update -q >&2 || warn "apt-get update of $suite's lists reported errors"
	fi
	echo "$opts"
}

# Where a lab kernel series is unpacked (see scripts/lab-kernel).
kernel_dir() {
	echo "$ZP_BUILD/kernels/$1"
}

# The ABI actually fetched for a series (may differ from the recorded one
# after a loud fallback).
kernel_abi() {
	cat "$(kernel_dir "$1")/abi" 2>/dev/null || die "lab kernel $1 not fetched: run scripts/lab-kernel $1"
}

# Path of a package's .deb cached under build/kernels/debs, downloaded with
# apt-get download first if missing (never installed), from SUITE's
# private apt state when one is named. Newest version wins.
cached_deb() {
	local pkg="$1" suite="${2:-}" debs="$ZP_BUILD/kernels/debs" deb opts
	mkdir -p "$debs"
	if ! ls "$debs/${pkg}_"*.deb >/dev/null 2>&1; then
		opts=$(kernel_apt_opts "$suite")
		log "downloading $pkg${suite:+ ($suite)}"
		# shellcheck disable=SC2086 # the options split into words
		(cd "$debs" && apt-get $opts download -q "$pkg" 2>&1 |
			grep -v '^W: Download is performed unsandboxed' >&2 || true)
	fi
	deb=$(ls "$debs/${pkg}_"*.deb 2>/dev/null | sort -V | tail -n 1)
	[ -n "$deb" ] || die "apt-get download $pkg failed"
	echo "$deb"
}

# Stream the kernel source tarball (.tar.xz) out of a linux-source .deb.
linux_source_tarball() {
	dpkg-deb --fsys-tarfile "$1" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz'
}

# The few kernel source files zeropin's build and tests read (never
# committed): VFIO's private header (the ABI check), the kselftest headers,
# the mtty mdev sample (an emulated-IOMMU group for the lab).
LINUX_SOURCE_FILES=(drivers/vfio/vfio.h tools/testing/selftests/kselftest.h
	tools/testing/selftests/kselftest_harness.h samples/vfio-mdev/mtty.c)

# The Debian series a lab series is built from: 6.12-debug is 6.12's source.
base_series() {
	echo "${1%-debug}"
}

# Extract LINUX_SOURCE_FILES of Debian's linux-source-SERIES once, into
# build/kernels/SERIES/src/ (paths kept; the package version in
# src/version); print that folder. The tarball is decompressed only once.
linux_source_files() {
	local series out deb tmp f
	series=$(base_series "$1")
	out="$(kernel_dir "$series")/src"
	if [ ! -f "$out/version" ]; then
		deb=$(cached_deb "linux-source-$series" "$(recorded_suite "$series")")
		tmp=$(mktemp -d)
		linux_source_tarball "$deb" |
			tar -xJ -C "$tmp" --strip-components=1 --wildcards \
				"${LINUX_SOURCE_FILES[@]/#/*/}"
		mkdir -p "$out"
		for f in "${LINUX_SOURCE_FILES[@]}"; do
			[ -f "$tmp/$f" ] || die "linux-source-$series has no $f"
			mkdir -p "$out/$(dirname "$f")"
			cp "$tmp/$f" "$out/$f"
		done
		rm -rf "$tmp"
		dpkg-deb -f "$deb" Version >"$out/version"
	fi
	echo "$out"
}

# 6.12-debug: the debug lab kernel built from 6.12's source
# (scripts/lab-debug-kernel). 7.2: upstream's newest, Debian unstable's.
check_series() {
	case "$1" in
	6.12 | 6.1 | 6.12-debug | 7.2) ;;
	*) die "unknown kernel series '$1' (supported: 6.12, 6.1, 6.12-debug, 7.2)" ;;
	esac
}

# The first Debian mirror this machine installs from (one-line or deb822
# sources), e.g. http://deb.debian.org/debian; non-zero when there is none.
debian_mirror() {
	{
		grep -hE '^deb\s+(\[[^]]*\]\s+)?https?://' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			sed -E 's/^deb\s+(\[[^]]*\]\s+)?(\S+).*/\2/'
		grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{ print $2 }'
	} | grep -m1 -E '/debian/?$' | sed 's|/$||'
}

# The lab kernel died of a torn text patch: multi-threaded TCG now and
# then lets a vCPU run its stale translation of a site another vCPU is
# patching (a static key, a tracepoint), which ends in an int3 oops at an
# address no breakpoint owns. Told from a real int3 (a straight-line-
# speculation int3 after a ret reached through a bad return address, say)
# by the oops's Code: line: the trapping byte, just before <..>, is no
# longer 0xcc, as the patch finished meanwhile. An oops with a zeropin
# frame in it never counts.
died_of_text_patch() {
	local log="$1" oops
	oops=$(grep -a -A 80 -m1 -E 'int3: 0000 \[#' "$log" 2>/dev/null | sed '/---\[ end trace/q') || true
	[ -n "$oops" ] &&
		! grep -q '\[zeropin\]' <<<"$oops" &&
		grep -m1 'Code: ' <<<"$oops" | grep -qE ' ([0-9a-f][0-9abd-f]|[0-9abd-f][0-9a-f]) <[0-9a-f]{2}>'
}
