# shellcheck shell=bash
# Shared by zeropin's host programs (zeropin-host, the libvirt hook,
# zeropin-domxml, zeropin-timeline): the configuration, the module's sysfs
# and debugfs files, zeropinfs mounts, libvirt's qemu.conf and domain XML.
# Source it; it defines variables and functions only. `make install` puts
# it beside the programs (PREFIX/lib/zeropin/host.sh).

# --- configuration ---
# Settings, lowest precedence first: the defaults below, the configuration
# file (KEY=VALUE lines, # comments; read, never executed), the
# environment, the program's options.
ZP_CONF="${ZP_CONF:-/etc/zeropin/zeropin.conf}"
ZP_CONF_KEYS="ZEROPIN_MOUNT ZEROPIN_MOUNT_SIZE ZEROPIN_MOUNT_MODE ZEROPIN_POOL_MIB
ZEROPIN_RUN_BUILD ZEROPIN_MODULE ZEROPIN_DEVICES ZEROPIN_HOOK_WAIT_S ZEROPIN_QEMU_CONF
ZEROPIN_ALLOW_UNCONFINED"

zp_conf_defaults() {
	ZEROPIN_MOUNT=/run/zeropin		# where zeropinfs is mounted
	ZEROPIN_MOUNT_SIZE=""			# mount's size= (empty: half of RAM)
	ZEROPIN_MOUNT_MODE=0711			# mount's mode= (QEMUs traverse, never list)
	ZEROPIN_POOL_MIB=""			# pool target, MiB (empty: leave it)
	ZEROPIN_RUN_BUILD=""			# 1 GiB runs, 1 or 0 (empty: leave it)
	ZEROPIN_MODULE=""			# a zeropin.ko to insmod (empty: modprobe)
	ZEROPIN_DEVICES=""			# PCI addresses or vendor:device for vfio-pci
	ZEROPIN_HOOK_WAIT_S=1			# hook: longest wait for zeroed memory, s
	ZEROPIN_QEMU_CONF=/etc/libvirt/qemu.conf
	ZEROPIN_ALLOW_UNCONFINED=0		# 1: setup goes on with QEMU unconfined
}

# Is $1 one of the configuration's keys? (No subshell: the hook runs in
# every VM start, and a fork costs milliseconds on a loaded host.)
zp_conf_key() {
	local k
	for k in $ZP_CONF_KEYS; do
		[ "$k" = "$1" ] && return 0
	done
	return 1
}

# Read the configuration file, then let the environment override it.
# Returns non-zero with the reason in ZP_CONF_ERROR (the defaults and what
# was read stay set); zp_conf_load_or_die() is the strict form.
zp_conf_load() {
	local key val env_vals=() k line
	ZP_CONF_ERROR=""
	for k in $ZP_CONF_KEYS; do
		[ -n "${!k+set}" ] && env_vals+=("$k=${!k}")
	done
	zp_conf_defaults
	if [ -f "$ZP_CONF" ]; then
		while IFS= read -r line || [ -n "$line" ]; do
			line="${line%%#*}"
			[[ "$line" =~ ^[[:space:]]*$ ]] && continue
			if ! [[ "$line" =~ ^[[:space:]]*([A-Z0-9_]+)=(.*)$ ]]; then
				ZP_CONF_ERROR="$ZP_CONF: cannot read the line '$line' (want KEY=VALUE, no spaces around =)"
				continue
			fi
			key="${BASH_REMATCH[1]}"
			val="${BASH_REMATCH[2]}"
			val="${val%"${val##*[![:space:]]}"}"
			val="${val#\"}" && val="${val%\"}"
			if ! zp_conf_key "$key"; then
				ZP_CONF_ERROR="$ZP_CONF: unknown setting $key (known: $(echo $ZP_CONF_KEYS))"
				continue
			fi
			printf -v "$key" '%s' "$val"
		done <"$ZP_CONF"
	fi
	for k in "${env_vals[@]}"; do
		printf -v "${k%%=*}" '%s' "${k#*=}"
	done
	zp_conf_check
	[ -z "$ZP_CONF_ERROR" ]
}

zp_conf_load_or_die() {
	zp_conf_load || zp_die "$ZP_CONF_ERROR"
}

# Numbers are numbers (they end up in shell arithmetic).
zp_conf_check() {
	# decimal, no leading 0 (shell arithmetic would read it as octal)
	[[ "$ZEROPIN_HOOK_WAIT_S" =~ ^(0|[1-9][0-9]*)$ ]] ||
		ZP_CONF_ERROR="ZEROPIN_HOOK_WAIT_S=$ZEROPIN_HOOK_WAIT_S: want a number of seconds"
	[ -z "$ZEROPIN_POOL_MIB" ] || [[ "$ZEROPIN_POOL_MIB" =~ ^(0|[1-9][0-9]*)$ ]] ||
		ZP_CONF_ERROR="ZEROPIN_POOL_MIB=$ZEROPIN_POOL_MIB: want a number of MiB"
	[[ "$ZEROPIN_ALLOW_UNCONFINED" =~ ^[01]$ ]] ||
		ZP_CONF_ERROR="ZEROPIN_ALLOW_UNCONFINED=$ZEROPIN_ALLOW_UNCONFINED: want 0 or 1"
	[[ "$ZEROPIN_RUN_BUILD" =~ ^[01]?$ ]] ||
		ZP_CONF_ERROR="ZEROPIN_RUN_BUILD=$ZEROPIN_RUN_BUILD: want 1 (build 1 GiB runs) or 0"
	[[ "$ZEROPIN_MOUNT_MODE" =~ ^[0-7]{3,4}$ ]] ||
		ZP_CONF_ERROR="ZEROPIN_MOUNT_MODE=$ZEROPIN_MOUNT_MODE: want an octal mode"
	# it goes into qemu.conf and /proc/mounts: no quotes, spaces or escapes;
	# canonical (compared as a string with both); not a system folder
	[[ "$ZEROPIN_MOUNT" =~ ^(/[A-Za-z0-9_,+@:-][A-Za-z0-9_.,+@:-]*)+$ ]] &&
		[[ ! "$ZEROPIN_MOUNT" =~ /\.\.?(/|$) ]] ||
		ZP_CONF_ERROR="ZEROPIN_MOUNT=$ZEROPIN_MOUNT: want a canonical absolute path (no trailing /, no . or .. parts) of letters, digits and _ . , + @ : / -"
	case "$ZEROPIN_MOUNT" in
	/bin | /boot | /dev | /etc | /home | /lib | /lib64 | /media | /mnt | /opt | /proc | /root | /run | /sbin | /srv | /sys | /tmp | /usr | /var | /var/lib | /var/lib/libvirt | /var/lib/libvirt/qemu | /run/libvirt)
		ZP_CONF_ERROR="ZEROPIN_MOUNT=$ZEROPIN_MOUNT: a system folder; zeropinfs would hide what is there (the default is /run/zeropin)" ;;
	esac
	return 0
}

# --- messages ---
ZP_PROG="${ZP_PROG:-$(basename -- "$0")}"

zp_die() {
	echo "$ZP_PROG: error: $*" >&2
	exit 1
}

zp_warn() {
	echo "$ZP_PROG: warning: $*" >&2
}

zp_say() {
	echo "$ZP_PROG: $*" >&2
}

# Write a value to a sysfs file, saying so.
zp_sysfs_write() {
	zp_say "echo $2 > $1"
	echo "$2" >"$1"
}

# --- the module ---
ZP_SYSFS="${ZP_SYSFS:-/sys/kernel/zeropin}"
ZP_DEBUGFS=/sys/kernel/debug/zeropin
ZEROPINFS_MAGIC=7a70696e	# statfs f_type, kernel/zfs.h

zp_module_loaded() {
	[ -d /sys/module/zeropin ]
}

# Load zeropin.ko: $ZEROPIN_MODULE with insmod (its dependency vfio by
# modprobe first), else modprobe; with run_build as ZEROPIN_RUN_BUILD says
# from the start (the pool's first refill then leaves room for runs; the
# hook loads it too). Returns non-zero with the reason on stderr.
zp_module_load() {
	local params=()
	zp_module_loaded && return 0
	[ -z "$ZEROPIN_RUN_BUILD" ] || params=("run_build=$ZEROPIN_RUN_BUILD")
	if [ -n "$ZEROPIN_MODULE" ]; then
		[ -f "$ZEROPIN_MODULE" ] || { zp_warn "ZEROPIN_MODULE=$ZEROPIN_MODULE: no such file"; return 1; }
		modprobe vfio 2>/dev/null || true
		insmod "$ZEROPIN_MODULE" "${params[@]}" || return 1
	else
		modprobe zeropin "${params[@]}" || return 1
	fi
	zp_say "loaded zeropin $(cat /sys/module/zeropin/version 2>/dev/null)"
}

# One pool statistic in MiB (zero_mib, dirty_mib, inuse_mib, target_mib).
zp_pool() {
	echo "$(<"$ZP_SYSFS/pool/$1")"
}

# One counter of a debugfs counters file (pool_counters, iommu_counters);
# empty when debugfs or the module is not there.
zp_counter() {
	awk -v k="$2" '$1 == k { print $2 }' "$ZP_DEBUGFS/$1" 2>/dev/null || true
}

# --- zeropinfs ---
zp_is_zeropinfs() {
	[ "$(stat -f -c %t -- "$1" 2>/dev/null)" = "$ZEROPINFS_MAGIC" ]
}

# The mount's flags: guest RAM files are data, never programs, device
# nodes or set-id files (a QEMU that got write access to a folder there
# could otherwise plant one).
ZP_MOUNT_FLAGS=nosuid,nodev,noexec

# Mount zeropinfs on $ZEROPIN_MOUNT unless it is there already.
zp_mount() {
	local opts="$ZP_MOUNT_FLAGS,mode=$ZEROPIN_MOUNT_MODE"
	zp_is_zeropinfs "$ZEROPIN_MOUNT" && return 0
	[ -n "$ZEROPIN_MOUNT_SIZE" ] && opts="size=$ZEROPIN_MOUNT_SIZE,$opts"
	mkdir -p -- "$ZEROPIN_MOUNT"
	mount -t zeropinfs -o "$opts" none "$ZEROPIN_MOUNT" || return 1
	zp_say "mounted zeropinfs on $ZEROPIN_MOUNT ($opts)"
}

# A filesystem's type (statfs f_type, hex), size and free space in MiB,
# from one stat: into ZP_FS_TYPE, ZP_FS_SIZE_MIB, ZP_FS_FREE_MIB (no
# subshell: the hook calls it in every start of a zeropin domain).
zp_statfs() {
	local out bsize blocks bavail
	out=$(stat -f -c '%t %S %b %a' -- "$1" 2>/dev/null) || { ZP_FS_TYPE=""; return 1; }
	read -r ZP_FS_TYPE bsize blocks bavail <<<"$out"
	ZP_FS_SIZE_MIB=$((bsize * blocks / 1048576))
	ZP_FS_FREE_MIB=$((bsize * bavail / 1048576))
}

# MiB free on a mount.
zp_free_mib() {
	zp_statfs "$1" && echo "$ZP_FS_FREE_MIB"
}

# --- libvirt ---
# Settings of a qemu.conf ($1), read in one pass as libvirt reads them:
# for each KEY (the rest of the arguments), its first line KEY = VALUE into
# ZP_QC_KEY (empty when unset): a quoted string's text (either quotes), or
# a one-line list's items (["a", 'b']) joined by spaces. The hook reads
# several in every start: one pass over Debian's 970-line file, not one
# each, and in the shell itself, not through augeas (a fork).
zp_qemu_conf_read() {
	local conf="$1" line k rest v
	shift
	local -A seen=()
	for k; do printf -v "ZP_QC_$k" '%s' ""; done
	[ -r "$conf" ] || return 0
	while IFS= read -r line || [ -n "$line" ]; do
		for k; do
			# a glob first: the regex costs on every line
			[[ -z "${seen[$k]:-}" && "$line" == *"$k"* ]] || continue
			[[ "$line" =~ ^[[:space:]]*$k[[:space:]]*=[[:space:]]*(.*)$ ]] || continue
			seen[$k]=1
			rest=${BASH_REMATCH[1]} v=""
			while [[ "$rest" =~ ^[[:space:],\[]*(\"([^\"]*)\"|\'([^\']*)\')(.*)$ ]]; do
				v+="${v:+ }${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
				rest=${BASH_REMATCH[4]}
				[[ "$rest" =~ ^[[:space:]]*, ]] || break
			done
			printf -v "ZP_QC_$k" '%s' "$v"
		done
		[ "${#seen[@]}" -lt "$#" ] || break
	done <"$conf"
}

# One setting KEY of a qemu.conf (default ZEROPIN_QEMU_CONF), printed
# (see zp_qemu_conf_read()).
zp_qemu_conf_value() {
	local var="ZP_QC_$1"
	zp_qemu_conf_read "${2:-$ZEROPIN_QEMU_CONF}" "$1"
	echo "${!var}"
}

# memory_backing_dir of a qemu.conf ($1, default ZEROPIN_QEMU_CONF), empty
# when unset.
zp_backing_dir_setting() {
	zp_qemu_conf_value memory_backing_dir "$@"
}

# The folder libvirt puts file-backed guest RAM in: memory_backing_dir, or
# its default.
zp_backing_dir() {
	local dir
	dir=$(zp_backing_dir_setting "$@")
	echo "${dir:-$ZP_LIBVIRT_DEFAULT_BACKING_DIR}"
}
ZP_LIBVIRT_DEFAULT_BACKING_DIR=/var/lib/libvirt/qemu/ram

# QEMU's user or group ($1: user or group) as libvirt runs it: qemu.conf's
# setting, or Debian's build default (libvirt-qemu for both).
zp_qemu_identity() {
	local val
	val=$(zp_qemu_conf_value "$1" "${2:-}")
	echo "${val:-$ZP_LIBVIRT_DEFAULT_QEMU_ID}"
}
ZP_LIBVIRT_DEFAULT_QEMU_ID=libvirt-qemu

# The libvirt daemon that reads qemu.conf: virtqemud where the modular
# daemons run (Debian 13's default, socket-activated), else libvirtd
# (Debian 12). Printed, for the messages that say what to restart.
zp_libvirt_daemon() {
	if [ -e /run/libvirt/virtqemud-sock ] || { [ -d /run/systemd/system ] &&
		systemctl -q is-enabled virtqemud.socket virtqemud.service 2>/dev/null; }; then
		echo virtqemud
	else
		echo libvirtd
	fi
}

# What to restart for a new memory_backing_dir, and when: libvirt removes
# a stopping domain's RAM folder under the memory_backing_dir it read at
# its start, so a domain with file-backed RAM that runs across the change
# would leave its RAM file behind when it stops.
zp_libvirt_restart_hint() {
	echo "systemctl restart $(zp_libvirt_daemon) once no domain with file-backed RAM runs (or reboot)"
}

# Where setup keeps what it replaced in qemu.conf: its path, the folder
# written, the line replaced, the value it held ("unset"), one a line.
# The hook reads it to tell a qemu.conf that lost zeropin's setting (a
# libvirt upgrade whose maintainer's file was taken).
ZP_QEMU_CONF_SAVED="${ZP_STATE_DIR:-/var/lib/zeropin}/qemu-conf"
# Each domain's own RAM folder under the mount is MOUNT/domains/PROFILE,
# PROFILE being libvirt's AppArmor profile for the domain (libvirt-UUID):
# zeropin-host setup writes the one rule that lets every domain's QEMU
# open its own folder and no other (ZP_APPARMOR_RULE, included from
# libvirt's QEMU abstraction); the libvirt hook makes the folders where
# the rule names the mount (zeropin-host(8), the hook's --help).
ZP_APPARMOR_D="${ZP_APPARMOR_D:-/etc/apparmor.d}"	# AppArmor's profiles, libvirt's among them
ZP_SECURITYFS="${ZP_SECURITYFS:-/sys/kernel/security}"	# where the kernel shows its LSMs
ZP_APPARMOR_RULE="$ZP_APPARMOR_D/abstractions/zeropin-qemu"
ZP_DOMAINS_DIR=domains	# MOUNT/domains/libvirt-UUID: one per domain

# Convert an amount in a libvirt unit to MiB (rounded up).
zp_to_mib() {
	local n="$1" unit="${2:-KiB}" mult
	case "$unit" in
	b | bytes) mult=1 ;;
	KB) mult=1000 ;;
	k | KiB) mult=1024 ;;
	MB) mult=1000000 ;;
	M | MiB) mult=1048576 ;;
	GB) mult=1000000000 ;;
	G | GiB) mult=1073741824 ;;
	TB) mult=1000000000000 ;;
	T | TiB) mult=1099511627776 ;;
	*) return 1 ;;
	esac
	# a decimal number (no octal from a leading 0) whose bytes fit 63 bits
	[[ "$n" =~ ^[0-9]{1,18}$ ]] || return 1
	n=$((10#$n))
	[ "$n" -le $((0x7fffffffffffffff / mult)) ] || return 1
	echo $(((n * mult + 1048575) / 1048576))
}

# An XPath string value of the XML in $1 (empty when absent; non-zero
# status when the XML does not parse).
zp_xpath() {
	local out rc=0
	out=$(printf '%s' "$1" | xmllint --nowarning --xpath "string($2)" - 2>/dev/null) || rc=$?
	# xmllint: 0 found, 10 empty result; anything else is a parse error
	case "$rc" in 0 | 10) printf '%s' "$out" ;; *) return 1 ;; esac
}
