/*
 * A multiboot "kernel" for tests/qemu-owner: from 32 MiB to 48 MiB it writes
 * a counter into the first and third word of every 4 KiB page, in a loop,
 * forever (under TCG, each page is rewritten some thousand times a second),
 * and after each of those writes, the counter into the page at 48 MiB, a
 * hot page whose TLB entry never goes cold.
 * Loaded with `qemu-system-x86_64 -kernel writer.elf`; no firmware or disk
 * needed beyond SeaBIOS and the multiboot option ROM.
 *
 * Build: as --32 -o writer.o writer.S
 *        ld -m elf_i386 -Ttext 0x100000 -e _start -o writer.elf writer.o
 */
	.section .text
	.code32
	.align 4
mbhdr:	/* multiboot 1 header: magic, flags (none: ELF layout), checksum */
	.long 0x1BADB002
	.long 0x00000000
	.long -(0x1BADB002 + 0x00000000)
	.globl _start
_start:
	cli
	xorl %eax, %eax
1:	movl $0x02000000, %edi
2:	movl %eax, (%edi)
	movl %eax, 8(%edi)
	movl %eax, 0x03000000	/* and one hot page, at 48 MiB, every time */
	incl %eax
	addl $4096, %edi
	cmpl $0x03000000, %edi
	jb 2b
	jmp 1b
