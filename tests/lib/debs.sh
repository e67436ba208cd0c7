# shellcheck shell=bash
# Helpers for the host tests of zeropin's Debian packages
# (tests/host/deb_install.sh, tests/host/host_lifecycle.sh). Source it.

# repack_newer SRC_DIR DST_DIR [SOURCE_NOTE]: a newer build of the .debs in
# SRC_DIR into DST_DIR: each repacked with its Debian revision raised to 99
# (as make deb DEB_REVISION=99 would version it). With SOURCE_NOTE (plain
# words), zeropin-dkms's kernel/main.c also gets MODULE_INFO(zeropin_build,
# SOURCE_NOTE), so the module DKMS builds from the new package differs from
# the old (another srcversion, which a comment would not change: modpost
# sums the sources without them): an upgrade whose module can be told from
# the one it replaces (modinfo -F zeropin_build).
repack_newer() {
	local src="$1" dst="$2" note="${3:-}" d v work
	work=$(mktemp -d) || return 1
	mkdir -p "$dst"
	for d in "$src"/zeropin-*.deb; do
		rm -rf "$work/x"
		dpkg-deb -R "$d" "$work/x" || return 1
		v=$(sed -n 's/^Version: //p' "$work/x/DEBIAN/control")
		sed -i "s/^Version: .*/Version: ${v%%-*}-99${v#*-[0-9]*}/" "$work/x/DEBIAN/control"
		if [ -n "$note" ] && [ -d "$work/x/usr/src" ]; then
			echo "MODULE_INFO(zeropin_build, \"$note\");" >>"$(echo "$work"/x/usr/src/zeropin-*/kernel/main.c)" || return 1
			(cd "$work/x" && find usr -type f -exec md5sum {} +) >"$work/x/DEBIAN/md5sums"
		fi
		dpkg-deb -b "$work/x" "$dst/" >/dev/null || return 1
	done
	rm -rf "$work"
}
