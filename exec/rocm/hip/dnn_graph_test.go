package hip

import "testing"

// TestGraphAccurate checks which engines' numerical notes keep Loom's
// accuracy promise on the graph API's path, type by type.
func TestGraphAccurate(t *testing.T) {
	half := ConvDesc{Type: GemmBF16}
	f32 := ConvDesc{Type: GemmF32}
	tf32 := ConvDesc{Type: GemmF32, TF32: true}
	f64 := ConvDesc{Type: GemmF64}
	for _, c := range []struct {
		cd    ConvDesc
		notes []int32
		want  bool
	}{
		{half, nil, true},
		{half, []int32{cudnnNoteTensorCore}, true}, // tensor cores accumulate halves in f32
		{half, []int32{cudnnNoteTensorCore, cudnnNoteReducedReduction}, false},
		{half, []int32{cudnnNoteWinograd}, false},
		{half, []int32{cudnnNoteWinograd13}, false},
		{ConvDesc{Type: GemmF16}, []int32{cudnnNoteFFT}, false},
		{half, []int32{cudnnNoteNondeterministic}, false},
		{f32, []int32{cudnnNoteTensorCore}, false}, // TF32 without AllowTF32
		{f32, []int32{cudnnNoteDownConvert}, false},
		{f32, []int32{cudnnNoteWinograd}, true}, // f32 takes any algorithm, as the legacy path
		{tf32, []int32{cudnnNoteTensorCore, cudnnNoteDownConvert}, true},
		{f64, []int32{cudnnNoteTensorCore}, false},
		{f64, nil, true},
		{tf32, []int32{cudnnNoteNondeterministic}, false},
	} {
		if got := graphAccurate(c.cd, c.notes); got != c.want {
			t.Errorf("graphAccurate(%v TF32=%v, %v) = %v, want %v", c.cd.Type, c.cd.TF32, c.notes, got, c.want)
		}
	}
}

// TestGraphStrides checks the tensors' strides in the graph API's NCHW
// dim order, for NCHW and channels-last arrays.
func TestGraphStrides(t *testing.T) {
	d := [4]int64{2, 3, 4, 5} // N, C, H, W
	if got, want := graphStrides(d, false), [4]int64{60, 20, 5, 1}; got != want {
		t.Errorf("NCHW strides %v, want %v", got, want)
	}
	// NHWC: element (n, c, h, w) at ((n·H + h)·W + w)·C + c.
	if got, want := graphStrides(d, true), [4]int64{60, 1, 15, 3}; got != want {
		t.Errorf("NHWC strides %v, want %v", got, want)
	}
}
