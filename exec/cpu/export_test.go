package cpu

// MappedBytes is the bytes of mapped arenas alive in the process.
func MappedBytes() int64 { return mappedBytes.Load() }
