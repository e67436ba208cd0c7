#!/bin/bash
# qemu_firmware - the QEMU series' fast firmware path (machine property
# fast-firmware, qemu-patches/0006), nested in the lab host: the L2 of
# lib/l2.sh (q35, SeaBIOS, the edu passed through) is started paused,
# resumed, and timed from the resume to its kernel's first line (or to its
# boot sector's mark). SeaBIOS's own log (debugcon) says whether it showed
# a menu; the patched QEMU's trace says what the option changed.
#
#   stock_boot_menu_waits          stock QEMU with -boot menu=on shows the
#                                  menu and waits for a key; without, it
#                                  does not (what the wait costs is printed)
#   fast_firmware_skips_menu       patched QEMU, fast-firmware=on and the
#                                  same -boot menu=on: no menu, QEMU warns
#                                  that it ignored it
#   fast_firmware_hides_rom        the edu (with an option ROM in the lab:
#                                  scripts/lab --edu-rom), passed through to
#                                  an L2 booting -kernel: without the option
#                                  its ROM BAR is there, with it not
#   fast_firmware_boots_from_disk  with bootindex on a disk and the edu,
#                                  SeaBIOS boots the disk's boot sector and
#                                  the edu keeps its ROM
#
# Every run has a deadline; times are printed, never asserted (TCG in TCG).
set -u
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
TAP_PREFIX=qemu_firmware
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
MBR=/tmp/l2-mbr.img
MENU_PROMPT='Press ESC for boot menu'
BOOT_SECTOR_MARK='zeropin-mbr'

# A raw disk whose boot sector writes BOOT_SECTOR_MARK to SeaBIOS's
# debugcon (port 0x402) and halts: cld; xor ax,ax; mov ds,ax;
# mov si,msg; mov dx,0x402; 1: lodsb; test al,al; jz 2f; out dx,al;
# jmp 1b; 2: hlt; jmp 2b; msg.
make_mbr() {
	rm -f "$MBR"
	truncate -s 1M "$MBR"
	printf '\xfc\x31\xc0\x8e\xd8\xbe\x16\x7c\xba\x02\x04\xac\x84\xc0\x74\x03\xee\xeb\xf8\xf4\xeb\xfd%s\n\0' \
		"$BOOT_SECTOR_MARK" | dd of="$MBR" conv=notrunc status=none
	printf '\x55\xaa' | dd of="$MBR" bs=1 seek=510 conv=notrunc status=none
}

# fw_run QEMU MARK-FILE MARK ARGS...: lib/l2.sh's timed start of the L2
# (its arguments, the patched build's trace of what fast-firmware changed,
# ARGS), then SeaBIOS's menu prompts into MENUS and the trace into TRACE.
fw_run() {
	local qemu="$1" markfile="$2" mark="$3" trace=()
	shift 3
	rm -f /tmp/l2.trace
	l2_setup >/dev/null	# no zeroing of the last L2's RAM beside this start
	l2_base_args
	[ "$qemu" = "$PATCHED" ] && trace=(-trace x86_fw_cfg_fast_firmware -trace vfio_pci_rom_fast_firmware
		-trace vfio_pci_size_rom -D /tmp/l2.trace)
	l2_timed_start "$qemu" "$markfile" "$mark" "${L2_BASE[@]}" "${trace[@]}" "$@"
	MENUS=$(grep -c "$MENU_PROMPT" /tmp/l2.debugcon 2>/dev/null)
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	echo "# $(l2_flavour "$qemu") ${FW_LABEL:-$*}: ready in $READY_S s, resume to '$mark' ${RESUME_S:-never} s, $MENUS menu prompts"
}

# fw_kernel QEMU ARGS...: fw_run to the L2 kernel's first line.
fw_kernel() {
	local qemu="$1"
	shift
	l2_kernel_args
	FW_LABEL="to the kernel, ${*:-defaults}"
	fw_run "$qemu" /tmp/l2.console 'Linux version' "${L2_KERNEL[@]}" "$@"
}

test_stock_menu() {
	fw_kernel "$STOCK"
	STOCK_S=$RESUME_S
	local default_menus=$MENUS
	fw_kernel "$STOCK" -boot menu=on
	STOCK_MENU_S=$RESUME_S
	if [ -n "$STOCK_S" ] && [ "$default_menus" = 0 ] && [ -n "$STOCK_MENU_S" ] && [ "$MENUS" = 1 ]; then
		ok stock_boot_menu_waits
	else
		not_ok stock_boot_menu_waits "menu prompts: $default_menus by default, $MENUS with -boot menu=on (expected 0, 1); resume to first line: ${STOCK_S:-never}, ${STOCK_MENU_S:-never}
$ERR"
	fi
}

test_fast_menu() {
	fw_kernel "$PATCHED"
	PATCHED_S=$RESUME_S
	ROM_IN_LAB=0
	echo "$TRACE" | grep -q "vfio_pci_size_rom $EDU ROM size" && ROM_IN_LAB=1
	fw_kernel "$PATCHED" -machine fast-firmware=on -boot menu=on
	FAST_S=$RESUME_S
	if [ -n "$PATCHED_S" ] && [ -n "$FAST_S" ] && [ "$MENUS" = 0 ] &&
		echo "$ERR" | grep -q 'fast-firmware=on: ignoring -boot menu=on' &&
		echo "$TRACE" | grep -q 'x86_fw_cfg_fast_firmware fast-firmware: boot menu off'; then
		ok fast_firmware_skips_menu
	else
		not_ok fast_firmware_skips_menu "menu prompts: $MENUS (expected 0); resume to first line: ${FAST_S:-never}
$ERR
$TRACE"
	fi
	# the same runs: the edu has no bootindex, the L2 boots -kernel
	if [ "$ROM_IN_LAB" = 0 ]; then
		ok "fast_firmware_hides_rom # SKIP the lab's edu has no option ROM (scripts/lab --edu-rom)"
	elif echo "$TRACE" | grep -q "vfio_pci_rom_fast_firmware $EDU ROM of .* hidden" &&
		! echo "$TRACE" | grep -q "vfio_pci_size_rom $EDU"; then
		ok fast_firmware_hides_rom
	else
		not_ok fast_firmware_hides_rom "the edu's ROM BAR with fast-firmware=on:
$TRACE"
	fi
}

test_fast_disk() {
	make_mbr
	FW_LABEL=
	fw_run "$PATCHED" /tmp/l2.debugcon "$BOOT_SECTOR_MARK" -machine fast-firmware=on -boot strict=on \
		-drive "file=$MBR,format=raw,if=none,id=disk0" -device ide-hd,drive=disk0,bus=ide.0,bootindex=1 \
		-device "vfio-pci,host=$EDU,bootindex=2"
	if [ -n "$RESUME_S" ] && ! echo "$TRACE" | grep -q vfio_pci_rom_fast_firmware &&
		{ [ "$ROM_IN_LAB" = 0 ] || echo "$TRACE" | grep -q "vfio_pci_size_rom $EDU ROM size"; }; then
		ok fast_firmware_boots_from_disk
	else
		not_ok fast_firmware_boots_from_disk "boot sector mark: ${RESUME_S:-never}; menu prompts: $MENUS; trace:
$TRACE
$ERR
$(tail -n 5 /tmp/l2.debugcon 2>/dev/null)"
	fi
	rm -f "$MBR"
}

# What each step was worth, resume to the first kernel line (TCG in TCG:
# compare within this run only).
report() {
	echo "# resume to the L2 kernel's first line: stock ${STOCK_S:-?} s, stock -boot menu=on ${STOCK_MENU_S:-?} s," \
		"patched ${PATCHED_S:-?} s, patched fast-firmware=on (menu=on asked) ${FAST_S:-?} s"
	[ -n "${STOCK_S:-}" ] && [ -n "${STOCK_MENU_S:-}" ] && [ -n "${FAST_S:-}" ] || return 0
	echo "# the menu wait cost $(echo "$STOCK_MENU_S - $STOCK_S" | bc) s; fast-firmware=on saves" \
		"$(echo "$STOCK_MENU_S - $FAST_S" | bc) s against stock -boot menu=on, $(echo "$STOCK_S - $FAST_S" | bc) s against stock defaults"
}

main() {
	l2_require
	echo "TAP version 13"
	echo "1..4"
	test_stock_menu
	test_fast_menu
	test_fast_disk
	report
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
