#!/bin/bash
# qemu_firmware - the standard knobs zeropin-domxml sets instead of a QEMU
# patch for firmware waits, nested in the lab host: the L2 of lib/l2.sh
# (q35, SeaBIOS, the edu passed through) is started paused, resumed, and
# timed from the resume to its kernel's first line. SeaBIOS's own log
# (debugcon) says whether it showed a menu; QEMU's trace whether it gave
# the device's option ROM to the guest.
#
#   stock_boot_menu_waits   -boot menu=on (libvirt's <bootmenu
#                           enable='yes'/>) shows the menu and waits for a
#                           key; without it (zeropin-domxml writes
#                           enable='no') SeaBIOS does not (what the wait
#                           costs is printed)
#   rombar_off_hides_rom    the edu (with an option ROM in the lab:
#                           scripts/lab --edu-rom) passed through with
#                           rombar=0 (zeropin-domxml --hostdev-rom off:
#                           <rom bar='off'/>): QEMU reads no ROM from the
#                           device and the firmware runs none; with the
#                           default it does (what the ROM costs is printed)
#
# Every run has a deadline; times are printed, never asserted (TCG in TCG).
set -u
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
TAP_PREFIX=qemu_firmware
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
MENU_PROMPT='Press ESC for boot menu'

# fw_run QEMU MARK-FILE MARK ARGS...: lib/l2.sh's timed start of the L2
# (its arguments, QEMU's trace of the device's ROM, ARGS), then SeaBIOS's
# menu prompts into MENUS and the trace into TRACE.
fw_run() {
	local qemu="$1" markfile="$2" mark="$3"
	shift 3
	rm -f /tmp/l2.trace
	l2_setup >/dev/null	# no zeroing of the last L2's RAM beside this start
	l2_base_args
	l2_timed_start "$qemu" "$markfile" "$mark" "${L2_BASE[@]}" -trace vfio_pci_size_rom -D /tmp/l2.trace "$@"
	MENUS=$(grep -c "$MENU_PROMPT" /tmp/l2.debugcon 2>/dev/null)
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	echo "# $(l2_flavour "$qemu") ${FW_LABEL:-$*}: ready in $READY_S s, resume to '$mark' ${RESUME_S:-never} s, $MENUS menu prompts"
}

# fw_kernel QEMU DEVICE-OPTIONS ARGS...: fw_run to the L2 kernel's first
# line.
fw_kernel() {
	local qemu="$1"
	l2_kernel_args "$EDU" "$2"
	shift 2
	FW_LABEL="to the kernel, ${*:-defaults}"
	fw_run "$qemu" /tmp/l2.console 'Linux version' "${L2_KERNEL[@]}" "$@"
}

test_stock_menu() {
	fw_kernel "$STOCK" ""
	STOCK_S=$RESUME_S
	STOCK_TRACE=$TRACE
	local default_menus=$MENUS
	fw_kernel "$STOCK" "" -boot menu=on
	STOCK_MENU_S=$RESUME_S
	if [ -n "$STOCK_S" ] && [ "$default_menus" = 0 ] && [ -n "$STOCK_MENU_S" ] && [ "$MENUS" = 1 ]; then
		ok stock_boot_menu_waits
	else
		not_ok stock_boot_menu_waits "menu prompts: $default_menus by default, $MENUS with -boot menu=on (expected 0, 1); resume to first line: ${STOCK_S:-never}, ${STOCK_MENU_S:-never}
$ERR"
	fi
}

test_rombar() {
	local rom_in_lab=0
	echo "$STOCK_TRACE" | grep -q "vfio_pci_size_rom $EDU ROM size" && rom_in_lab=1
	fw_kernel "$STOCK" ",rombar=0"
	ROMBAR_OFF_S=$RESUME_S
	if [ "$rom_in_lab" = 0 ]; then
		ok "rombar_off_hides_rom # SKIP the lab's edu has no option ROM (scripts/lab --edu-rom)"
	elif [ -n "$ROMBAR_OFF_S" ] && ! echo "$TRACE" | grep -q "vfio_pci_size_rom $EDU"; then
		ok rombar_off_hides_rom
	else
		not_ok rombar_off_hides_rom "resume to first line: ${ROMBAR_OFF_S:-never}; the edu's ROM with rombar=0:
$TRACE
$ERR"
	fi
}

# What each knob was worth, resume to the first kernel line (TCG in TCG:
# compare within this run only).
report() {
	echo "# resume to the L2 kernel's first line: defaults ${STOCK_S:-?} s, -boot menu=on ${STOCK_MENU_S:-?} s," \
		"rombar=0 ${ROMBAR_OFF_S:-?} s"
	[ -n "${STOCK_S:-}" ] && [ -n "${STOCK_MENU_S:-}" ] && [ -n "${ROMBAR_OFF_S:-}" ] || return 0
	echo "# the menu wait cost $(echo "$STOCK_MENU_S - $STOCK_S" | bc) s; rombar=0 saved" \
		"$(echo "$STOCK_S - $ROMBAR_OFF_S" | bc) s (the lab's ROM only returns)"
}

main() {
	l2_require
	echo "TAP version 13"
	echo "1..2"
	test_stock_menu
	test_rombar
	report
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
