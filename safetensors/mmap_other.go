//go:build !unix

package safetensors

import (
	"io"
	"os"
)

// mapFile reads the whole file into memory where mmap is not available.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	mem := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), mem); err != nil {
		return nil, nil, err
	}
	return mem, func() error { return nil }, nil
}
