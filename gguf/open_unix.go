//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Open memory-maps the file at path read-only and parses it. Data returns
// slices of the mapping; Close unmaps it. The file may not be truncated
// while it is mapped: reading a page past its new end raises SIGBUS, which
// no reader of mapped files can catch.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	// The mapping holds its own reference to the file.
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: %d bytes do not fit this machine's address space", path, size)
	}
	if size == 0 { // mmap refuses a length of 0
		return parseBytes(nil, path)
	}
	mem, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := parseBytes(mem, path)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	f.unmap = func() error { return unix.Munmap(mem) }
	return f, nil
}
