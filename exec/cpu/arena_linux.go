package cpu

import "golang.org/x/sys/unix"

// mapBlock maps n bytes (rounded up to whole huge pages) of zeroed
// anonymous memory and asks for transparent huge pages on it. The advice
// may be refused (THP off): the mapping then works with 4 KiB pages. ok is
// false when the mapping itself fails; the caller uses the Go heap.
func mapBlock(n int) (b []byte, ok bool) {
	n = (n + hugeBytes - 1) &^ (hugeBytes - 1)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, false
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: refusal is fine
	return b, true
}

// unmapBlock releases a block from mapBlock.
func unmapBlock(b []byte) { _ = unix.Munmap(b) }
