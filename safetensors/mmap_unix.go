//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only and shared: pages come from the page
// cache, so opening a multi-gigabyte checkpoint costs no copy and no heap.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if int64(int(size)) != size {
		return nil, nil, unix.EFBIG
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return mem, func() error { return unix.Munmap(mem) }, nil
}
