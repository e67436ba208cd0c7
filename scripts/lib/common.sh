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

check_series() {
	case "$1" in
	6.12 | 6.1) ;;
	*) die "unknown kernel series '$1' (supported: 6.12, 6.1)" ;;
	esac
}
