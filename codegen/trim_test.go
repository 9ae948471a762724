package codegen

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/ir"
)

var trimTargets = []Target{
	{Platform: AMD, Arch: "gfx90a"},
	{Platform: AMD, Arch: "gfx1030"},
	{Platform: NVIDIA, Arch: "sm_90"},
}

// TestPreludeItems checks the scanner's view of the full prelude: keeping
// every item gives the prelude back byte for byte, every item but the
// unconditional ones defines a name, and no item mentions a loom_/LOOM_ name
// that no item defines (bar the other platform's macro, which code tests
// with #ifdef).
func TestPreludeItems(t *testing.T) {
	for _, tg := range trimTargets {
		ix, ok := preludeIndexFor(tg)
		if !ok {
			t.Fatalf("%v: no index", tg)
		}
		all := map[string]bool{}
		for n := range ix.byName {
			all[n] = true
		}
		if got := ix.render(all); got != Prelude(tg) {
			t.Errorf("%v: the items do not make up the prelude:\n%s", tg, got)
		}
		if got := ix.render(nil); got != PreludeFor(tg, "") {
			t.Errorf("%v: PreludeFor of an empty body is not the unconditional items", tg)
		}
		for _, it := range ix.items {
			if it.defines == "" && !strings.HasPrefix(strings.TrimSpace(it.text), "#pragma") {
				t.Errorf("%v: item defines no name:\n%s", tg, it.text)
			}
			for _, r := range it.refs {
				if ix.byName[r] == nil && r != "LOOM_AMD" && r != "LOOM_NVIDIA" {
					t.Errorf("%v: %s (item defining %q) mentions %s, which no prelude item defines", tg, strings.SplitN(it.text, "\n", 2)[0], it.defines, r)
				}
			}
		}
		if n := len(ix.byName["loom_add"]); n != 4 {
			t.Errorf("%v: %d items define loom_add, want 4 (i64, u32, float, double)", tg, n)
		}
	}
}

// TestPreludeForSmall: a plain f32 add carries a small fraction of the
// prelude, with every overload of the ops it uses and nothing else.
func TestPreludeForSmall(t *testing.T) {
	c := caseNamed(t, ir.OpAdd.String()+"/f32", opCases())
	for _, tg := range trimTargets {
		_, src := only(t, c, tg)
		full := Prelude(tg)
		if src.Code != PreludeFor(tg, src.Body)+src.Body {
			t.Errorf("%v: Code is not PreludeFor(Body) + Body", tg)
		}
		pre := strings.TrimSuffix(src.Code, src.Body)
		if len(pre) > 3500 || 4*len(pre) > len(full) {
			t.Errorf("%v: f32 add carries %d bytes of prelude (full: %d), want at most 3500 and a quarter", tg, len(pre), len(full))
		}
		for _, want := range []string{"LOOM_DEV float loom_add(float a, float b)", "LOOM_DEV long long loom_add(", "LOOM_DEV double loom_add(", "loom_ld16_f32", "loom_st16_f32", "#define LOOM_WAVE", "// End of prelude."} {
			if !strings.Contains(pre, want) {
				t.Errorf("%v: f32 add prelude lacks %q", tg, want)
			}
		}
		for _, absent := range []string{"loom_gelu_erf", "loom_normcdf", "loom_f16_to_f32", "loom_shfl_xor", "loom_ld16_u8", "// Comparisons"} {
			if strings.Contains(pre, absent) {
				t.Errorf("%v: f32 add prelude has unused %q", tg, absent)
			}
		}
		t.Logf("%v: f32 add: prelude %d of %d bytes, code %d bytes", tg, len(pre), len(full), len(src.Code))
	}
}

// TestPreludeForClosed checks every rendered source (all test cases, both
// platforms): each loom_/LOOM_ name the Code mentions that the full prelude
// defines is defined in the Code's own prelude, and that prelude keeps the
// full prelude's order (it is the full one with items left out).
func TestPreludeForClosed(t *testing.T) {
	for _, tg := range trimTargets[1:] {
		ix, _ := preludeIndexFor(tg)
		full := Prelude(tg)
		total, trimmed := 0, 0
		srcs := renderAll(t, allCases(true), tg)
		for _, s := range srcs {
			pre := strings.TrimSuffix(s.Code, s.Body)
			own := indexPrelude(pre)
			for _, n := range mentions(s.Code) {
				if ix.byName[n] != nil && own.byName[n] == nil {
					t.Errorf("%v: %s mentions %s, which its prelude does not define", tg, s.Name, n)
				}
			}
			for n, is := range own.byName {
				if len(is) != len(ix.byName[n]) {
					t.Errorf("%v: %s: %d items define %s, the full prelude has %d", tg, s.Name, len(is), n, len(ix.byName[n]))
				}
			}
			rest := full
			for _, it := range own.items {
				i := strings.Index(rest, it.text)
				if i < 0 {
					t.Fatalf("%v: %s: item out of order or not from the prelude:\n%s", tg, s.Name, it.text)
				}
				rest = rest[i+len(it.text):]
			}
			total += len(full) + len(s.Body)
			trimmed += len(s.Code)
		}
		t.Logf("%v: %d sources, average %d bytes with the full prelude, %d trimmed", tg, len(srcs), total/len(srcs), trimmed/len(srcs))
	}
}
