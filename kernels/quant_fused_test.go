package kernels

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/loomgraph/loom/codegen"
)

// TestQMVFVec checks that QMVFFused instantiates each format's one-row
// mat-vec with the load width quant.hip's own instantiation has.
func TestQMVFVec(t *testing.T) {
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^LOOM_QMVF3\((\w+), (\d+)\)`).FindAllStringSubmatch(quantHIP, -1) {
		v, _ := strconv.Atoi(m[2])
		got[m[1]] = v
	}
	if len(got) != len(qmvfVec) {
		t.Fatalf("quant.hip instantiates %v, qmvfVec is %v", got, qmvfVec)
	}
	for f, v := range qmvfVec {
		if got[f] != v {
			t.Errorf("%s: quant.hip loads %d bytes, qmvfVec says %d", f, got[f], v)
		}
	}
}

// TestQMVFFusedRefuses checks QMVFFused's errors: an entry that is not a
// one-row mat-vec.
func TestQMVFFusedRefuses(t *testing.T) {
	for _, e := range []string{"loom_qmvq_q4_k_bf16", "loom_qmvf_q5_k_bf16", "loom_qmvf_q4_k_u8", "loom_qmvf_"} {
		if _, _, err := QMVFFused(codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, e, nil, nil); err == nil {
			t.Errorf("QMVFFused(%q): no error", e)
		}
	}
}
