//go:build !linux

package cpu

// mapBlock is Linux-only; elsewhere arenas live on the Go heap.
func mapBlock(int) ([]byte, bool) { return nil, false }

func unmapBlock([]byte) {}
