package cpu

// MappedBytes is the bytes of mapped arenas alive in the process.
func MappedBytes() int64 { return mappedBytes.Load() }

// SetConvTileTarget sets the column tile conv steps aim for, in bytes, and
// returns a function that restores it.
func SetConvTileTarget(n int) (restore func()) {
	old := convTileTarget
	convTileTarget = n
	return func() { convTileTarget = old }
}

// ConvScratchMax is the bound on a conv step's scratch.
const ConvScratchMax = convScratchMax

// SetConvTaps turns the per-tap GEMM path of stride-1 convs on or off and
// returns a function that restores it.
func SetConvTaps(on bool) (restore func()) {
	old := convTaps
	convTaps = on
	return func() { convTaps = old }
}
