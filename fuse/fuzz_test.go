package fuse_test

import (
	encbin "encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

// byteSource is a rand.Source that replays a fuzz input: each Uint64 is the
// next 8 bytes (zero-padded), and once the bytes run out a PCG seeded with
// their hash takes over, so that every input builds a finite graph and the
// fuzzer's mutations steer the first (structural) choices: the base shape,
// the inputs and their views, the first ops.
type byteSource struct {
	b    []byte
	rest *rand.PCG
}

func newByteSource(b []byte) *byteSource {
	h := fnv.New64a()
	h.Write(b)
	return &byteSource{b: b, rest: rand.NewPCG(h.Sum64(), uint64(len(b)))}
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.rest.Uint64()
	}
	var w [8]byte
	n := copy(w[:], s.b)
	s.b = s.b[n:]
	// Spread the bytes over the whole word: rand.IntN(k) takes the high
	// bits of Uint64, so a little-endian word of one byte would always
	// choose 0.
	return encbin.BigEndian.Uint64(w[:])
}

// FuzzFusedUnfused builds a random small valid graph from the fuzz input
// with the generator of random_test.go (every elementwise family, casts
// between all dtypes, where, fills, strided, broadcast and offset views,
// reductions and reshapes when the first byte asks for them), compiles it
// fused and unfused with the verifier after every pass and runs both on the
// CPU: the outputs must be bit for bit equal, which the README promises for
// the CPU executor (each intermediate rounded to its dtype). The seed corpus
// is testdata/fuzz/FuzzFusedUnfused; `go test` runs it as plain tests and
// `go test -fuzz FuzzFusedUnfused ./fuse` explores further.
func FuzzFusedUnfused(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		opts := genOpts{reductions: data[0]&1 != 0, reshapes: data[0]&2 != 0}
		label := fmt.Sprintf("fuzz input %x", data)
		class, details := func() (class, details string) {
			defer func() {
				if p := recover(); p != nil {
					class, details = fmt.Sprint("panic: ", p), label
				}
			}()
			gn := randomGraphFrom(rand.New(newByteSource(data[1:])), label, opts)
			h := fnv.New64a()
			h.Write(data)
			return checkGen(gn, label, h.Sum64(), &coverage{reasons: map[string]int{}})
		}()
		if class != "" {
			t.Fatalf("%s\n%s", class, details)
		}
	})
}
