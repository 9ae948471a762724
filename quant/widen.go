package quant

import "fmt"

// WidensToQ8_0 reports whether blocks of t re-encode as Q8_0 without loss
// (WidenToQ8_0): the offset-free 32-value formats, whose values are d·q
// for small integers q and one f16 scale d a block, as Q8_0's are.
func WidensToQ8_0(t Type) bool { return t == Q4_0 || t == Q5_0 || t == Q8_0 }

// WidenToQ8_0 re-encodes src, a whole number of t's blocks (Q4_0, Q5_0 or
// Q8_0), as Q8_0 with the same values: each block keeps its scale's bits
// and its integers q − 8 (Q4_0) or q − 16 (Q5_0) become Q8_0's signed
// bytes, so Dequantize gives the same bits and an integer dot product the
// same sums. A model uses it to stack projections stored in different
// formats into one product (llama.cpp's k-quant files of models whose
// rows are not whole super-blocks store the queries and keys in Q5_0 and
// some layers' values in Q8_0). Q4_0 takes 18 bytes a block and Q5_0 22,
// Q8_0 34.
func WidenToQ8_0(t Type, src []byte) ([]byte, error) {
	tr, ok := t.Traits()
	if !ok || !WidensToQ8_0(t) {
		return nil, fmt.Errorf("quant.WidenToQ8_0(%v): only Q4_0, Q5_0 and Q8_0 widen to Q8_0 without loss", t)
	}
	if len(src)%tr.Size != 0 {
		return nil, fmt.Errorf("quant.WidenToQ8_0(%v): src has %d bytes, not a whole number of %d-byte blocks", t, len(src), tr.Size)
	}
	n := len(src) / tr.Size
	dst := make([]byte, n*34)
	for i := range n {
		x, y := src[i*tr.Size:(i+1)*tr.Size], dst[i*34:i*34+34]
		y[0], y[1] = x[0], x[1] // the scale, bit for bit
		q := y[2:34]
		switch t {
		case Q8_0:
			copy(q, x[2:34])
		case Q4_0:
			for j := range 16 {
				q[j] = byte(int8(x[2+j]&0xf) - 8)
				q[j+16] = byte(int8(x[2+j]>>4) - 8)
			}
		case Q5_0:
			qh := le32(x[2:])
			for j := range 16 {
				h0 := byte(qh>>j<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				q[j] = byte(int8(x[6+j]&0xf|h0) - 16)
				q[j+16] = byte(int8(x[6+j]>>4|h1) - 16)
			}
		}
	}
	return dst, nil
}
