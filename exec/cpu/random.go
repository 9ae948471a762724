package cpu

import (
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/philox"
)

// randOp is the tile function of rand and randn (ir/random.go): the
// standard variates of stream positions offset + start … from package
// philox, then the transform to [lo, hi) or to (mean, std) in the compute
// kind, each product written with an explicit conversion so that Go does
// not fuse it into an fma (the GPU rounds both steps).
func randOp(n *ir.Node) opFunc {
	p := n.Rand()
	dt := n.DType
	seed := p.Seed
	at := func(start int) uint64 { return p.Offset + uint64(start) } // wraps mod 2⁶⁴
	switch {
	case n.Op == ir.OpRandUniform && dt.Kind() == dtype.KF64:
		lo, d, hi, top := p.A, p.B-p.A, p.B, p.Top(dt)
		return func(dst tile, _ []tile, s int) {
			v := dst.f64
			philox.Uniform64s(v, seed, at(s))
			for i, u := range v {
				if r := lo + float64(d*u); r < hi {
					v[i] = r
				} else {
					v[i] = top
				}
			}
		}
	case n.Op == ir.OpRandUniform:
		lo, d := float32(p.A), float32(p.B-p.A)
		hi := ceil32(p.B)
		top := float32(p.Top(dt)) // a value of dt: exact in float32
		round := rounder(dt)
		return func(dst tile, _ []tile, s int) {
			v := dst.f32
			philox.Uniform32s(v, seed, at(s))
			for i, u := range v {
				v[i] = lo + float32(d*u)
			}
			if round != nil {
				round(dst)
			}
			for i, r := range v {
				if r >= hi {
					v[i] = top
				}
			}
		}
	case dt.Kind() == dtype.KF64: // randn
		mean, std := p.A, p.B
		return func(dst tile, _ []tile, s int) {
			v := dst.f64
			philox.Normal64s(v, seed, at(s))
			for i, z := range v {
				v[i] = float64(z*std) + mean
			}
		}
	default: // randn, float32 compute kind
		mean, std := float32(p.A), float32(p.B)
		return func(dst tile, _ []tile, s int) {
			v := dst.f32
			philox.Normal32s(v, seed, at(s))
			for i, z := range v {
				v[i] = float32(z*std) + mean
			}
		}
	}
}

// ceil32 is the smallest float32 ≥ v: for a float32 r, r ≥ v exactly when
// r ≥ ceil32(v).
func ceil32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}
