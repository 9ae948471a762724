package rocm

import (
	"os"
	"strings"
	"testing"

	"github.com/loomgraph/loom/codegen"
)

// TestBatchCompile: a batch compiles once; each member is then found in
// memory as the batch's object, and a new process (a fresh cache on the
// same directory) finds every member on disk through its alias, all
// sharing the batch's one object (one module per executor). A corrupt
// batch entry makes a member compile on its own.
func TestBatchCompile(t *testing.T) {
	dir := t.TempDir()
	comp := &fakeCompiler{}
	tg := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90", WaveSize: 32}
	opts := []string{"-O3"}
	var members []batchMember
	for _, n := range []string{"ka", "kb", "kc"} {
		body := "extern \"C\" __global__ void " + n + "() {}\n"
		members = append(members, batchMember{name: n, body: body, code: codegen.Unit(tg, body)})
	}
	c := newCodeCache()
	if !c.compileBatch(comp, dir, tg, "sm_90", opts, members) {
		t.Fatal("batch did not compile")
	}
	if n := comp.calls.Load(); n != 1 {
		t.Fatalf("batch of 3 made %d compiles, want 1", n)
	}
	unit := codegen.Unit(tg, members[0].body, members[1].body, members[2].body)
	for _, m := range members {
		obj, how, err := c.get(comp, dir, m.code, m.name, "sm_90", opts)
		if err != nil || how != fromMemory {
			t.Fatalf("%s: %s, %v; want a memory hit", m.name, how, err)
		}
		if string(obj.code) != "CODE:"+unit {
			t.Fatalf("%s: code object is not the batch's", m.name)
		}
	}
	fresh := newCodeCache()
	var first *codeObject
	for _, m := range members {
		obj, how, err := fresh.get(comp, dir, m.code, m.name, "sm_90", opts)
		if err != nil || how != fromDisk {
			t.Fatalf("%s: %s, %v; want a disk hit", m.name, how, err)
		}
		if string(obj.code) != "CODE:"+unit {
			t.Fatalf("%s: disk hit is not the batch's code", m.name)
		}
		if first == nil {
			first = obj
		} else if obj != first {
			t.Errorf("%s: members of one batch got different objects (two module loads)", m.name)
		}
	}
	if n := comp.calls.Load(); n != 1 {
		t.Fatalf("disk hits compiled: %d compiles", n)
	}
	// Corrupt the batch entry: a new process recompiles the member alone.
	key := cacheKey(unit, "sm_90", comp.Version(), opts)
	if err := os.WriteFile(entryPath(dir, key), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	obj, how, err := newCodeCache().get(comp, dir, members[1].code, "kb", "sm_90", opts)
	if err != nil || how != fromCompile || string(obj.code) != "CODE:"+members[1].code {
		t.Fatalf("after corrupting the batch: %s, %v, code %q", how, err, strings.TrimPrefix(string(obj.code), "CODE:")[:20])
	}
	// A batch that fails to compile enters nothing.
	bad := []batchMember{{name: "x", body: "syntax error\n", code: "x"}, {name: "y", body: "y\n", code: "y"}}
	c2 := newCodeCache()
	if c2.compileBatch(comp, t.TempDir(), tg, "sm_90", opts, bad) {
		t.Fatal("a bad batch compiled")
	}
	if len(c2.mem) != 0 {
		t.Fatalf("a failed batch left %d entries", len(c2.mem))
	}
}
