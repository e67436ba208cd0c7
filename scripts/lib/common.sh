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
# apt-get download first if missing (never installed). Newest version wins.
cached_deb() {
	local pkg="$1" debs="$ZP_BUILD/kernels/debs" deb
	mkdir -p "$debs"
	if ! ls "$debs/${pkg}_"*.deb >/dev/null 2>&1; then
		log "downloading $pkg"
		(cd "$debs" && apt-get download -q "$pkg" 2>&1 |
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
		deb=$(cached_deb "linux-source-$series")
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
# (scripts/lab-debug-kernel).
check_series() {
	case "$1" in
	6.12 | 6.1 | 6.12-debug) ;;
	*) die "unknown kernel series '$1' (supported: 6.12, 6.1, 6.12-debug)" ;;
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
