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

// SetConvRows turns the row-band path of convs with vertical stride 1
// (forwardRows) on or off and returns a function that restores it.
func SetConvRows(on bool) (restore func()) {
	old := convRows
	convRows = on
	return func() { convRows = old }
}

// SetConvOwnGemm turns the AVX-512 GEMM of float32 conv steps on or off
// and returns a function that restores it.
func SetConvOwnGemm(on bool) (restore func()) {
	old := convOwnGemm
	convOwnGemm = on
	return func() { convOwnGemm = old }
}

// ScatterDirectRuns is the number of scatter and slice-assignment steps
// that ran straight through the buffers (scatter.go).
func ScatterDirectRuns() int64 { return scatterDirectRuns.Load() }
