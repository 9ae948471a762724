//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads the file at path into memory and parses it (this platform
// has no mmap through golang.org/x/sys/unix); Data returns slices of that
// copy.
func Open(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return parseBytes(b, path)
}
