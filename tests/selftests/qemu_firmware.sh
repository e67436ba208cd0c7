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
#                                  same -boot menu=on,splash-time: no menu,
#                                  QEMU warns that it ignored them
#   fast_firmware_hides_rom        the edu, passed through without
#                                  bootindex, shows the guest no option ROM
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

# fw_run QEMU MARK-FILE MARK ARGS...: start QEMU paused (-S), resume it,
# wait (FIRST_LINE_S at most) until MARK appears in MARK-FILE, then quit.
# Sets READY_S (QEMU start to its monitor prompt), RESUME_S (resume to
# MARK, empty when it never came), MENUS (SeaBIOS menu prompts),
# TRACE (the patched build's trace), ERR (QEMU's stderr).
fw_run() {
	local qemu="$1" markfile="$2" mark="$3" t0 t1 pid i
	shift 3
	rm -f /tmp/l2.console /tmp/l2.debugcon /tmp/l2.trace /tmp/l2.mon /tmp/l2.out "$MNT/l2-ram"
	mkfifo /tmp/l2.mon
	exec 3<>/tmp/l2.mon
	l2_base_args
	local trace=()
	[ "$qemu" = "$PATCHED" ] && trace=(-trace fw_cfg_fast_firmware -trace vfio_pci_rom_fast_firmware -D /tmp/l2.trace)
	t0=$EPOCHREALTIME
	timeout $((FIRST_LINE_S + 60)) "$qemu" "${L2_BASE[@]}" "${trace[@]}" \
		-chardev file,id=dbg,path=/tmp/l2.debugcon -device isa-debugcon,iobase=0x402,chardev=dbg \
		-S -monitor stdio "$@" <&3 >/tmp/l2.out 2>/tmp/l2.err &
	pid=$!
	READY_S= RESUME_S=
	for ((i = 0; i < FIRST_LINE_S * 50; i++)); do
		grep -q '(qemu)' /tmp/l2.out 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	t1=$EPOCHREALTIME
	READY_S=$(echo "$t1 - $t0" | bc)
	echo cont >&3
	for ((i = 0; i < FIRST_LINE_S * 50; i++)); do
		grep -q "$mark" "$markfile" 2>/dev/null && { RESUME_S=$(echo "$EPOCHREALTIME - $t1" | bc); break; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.02
	done
	echo quit >&3
	wait "$pid"
	exec 3>&-
	MENUS=$(grep -c "$MENU_PROMPT" /tmp/l2.debugcon 2>/dev/null)
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	ERR=$(grep -v 'no available reset mechanism' /tmp/l2.err)
	rm -f "$MNT/l2-ram"
	echo "# $(l2_flavour "$qemu") $*: ready in $READY_S s, resume to '$mark' ${RESUME_S:-never} s, $MENUS menu prompts"
}

# fw_kernel QEMU ARGS...: fw_run to the L2 kernel's first line.
fw_kernel() {
	local qemu="$1"
	shift
	fw_run "$qemu" /tmp/l2.console 'Linux version' -device "vfio-pci,host=$EDU" -kernel /l2/vmlinux \
		-append 'console=ttyS0 earlyprintk=serial,ttyS0 panic=-1' "$@"
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
	fw_kernel "$PATCHED" -machine fast-firmware=on -boot menu=on,splash-time=5000
	FAST_S=$RESUME_S
	if [ -n "$PATCHED_S" ] && [ -n "$FAST_S" ] && [ "$MENUS" = 0 ] &&
		echo "$ERR" | grep -q 'fast-firmware=on: ignoring -boot menu=on' &&
		echo "$TRACE" | grep -q 'fw_cfg_fast_firmware boot menu off, menu wait 0 ms'; then
		ok fast_firmware_skips_menu
	else
		not_ok fast_firmware_skips_menu "menu prompts: $MENUS (expected 0); resume to first line: ${FAST_S:-never}
$ERR
$TRACE"
	fi
	# the same run: the edu has no bootindex
	if echo "$TRACE" | grep -q "vfio_pci_rom_fast_firmware $EDU ROM hidden"; then
		ok fast_firmware_hides_rom
	else
		not_ok fast_firmware_hides_rom "no vfio_pci_rom_fast_firmware for $EDU
$TRACE"
	fi
}

test_fast_disk() {
	make_mbr
	fw_run "$PATCHED" /tmp/l2.debugcon "$BOOT_SECTOR_MARK" -machine fast-firmware=on \
		-drive "file=$MBR,format=raw,if=none,id=disk0" -device ide-hd,drive=disk0,bus=ide.0,bootindex=1 \
		-device "vfio-pci,host=$EDU,bootindex=2"
	if [ -n "$RESUME_S" ] && [ "$MENUS" = 0 ] && ! echo "$TRACE" | grep -q vfio_pci_rom_fast_firmware; then
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
