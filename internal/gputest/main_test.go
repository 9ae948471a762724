package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A -test.v transcript with parallel subtests, a failure with its log, a
// skip, and a parent that passes because its children do.
const transcript = `=== RUN   TestA
=== RUN   TestA/one
=== PAUSE TestA/one
=== RUN   TestA/two
=== PAUSE TestA/two
=== CONT  TestA/one
    a_test.go:10: checking one
=== CONT  TestA/two
    a_test.go:20: two went wrong
    a_test.go:21: want 3, got 4
=== NAME  TestA/one
    a_test.go:11: one is fine
--- FAIL: TestA (0.00s)
    --- PASS: TestA/one (0.00s)
    --- FAIL: TestA/two (0.00s)
=== RUN   TestB
    b_test.go:5: no GPU device; skipped
--- SKIP: TestB (0.00s)
=== RUN   TestC
--- PASS: TestC (0.01s)
FAIL
`

func TestVerboseParser(t *testing.T) {
	p := &pkgRun{results: map[string]string{}, output: map[string][]string{}}
	v := &verboseParser{p: p}
	// Written in odd pieces: lines may be split across writes.
	for i := 0; i < len(transcript); i += 7 {
		v.Write([]byte(transcript[i:min(i+7, len(transcript))]))
	}
	v.flush()
	p.exitErr = errors.New("exit status 1")
	p.count()
	want := map[string]string{"TestA": "fail", "TestA/one": "pass", "TestA/two": "fail", "TestB": "skip", "TestC": "pass"}
	for n, r := range want {
		if p.results[n] != r {
			t.Errorf("result of %s = %q, want %q", n, p.results[n], r)
		}
	}
	if p.passed != 2 || p.failed != 1 || p.skipped != 1 {
		t.Errorf("counts passed %d failed %d skipped %d, want 2 1 1 (leaves; the exit status belongs to the failed test)", p.passed, p.failed, p.skipped)
	}
	if !slices.Equal(p.failures, []string{"TestA/two"}) {
		t.Errorf("failures %v, want [TestA/two]", p.failures)
	}
	out := strings.Join(p.output["TestA/two"], "")
	if !strings.Contains(out, "two went wrong") || !strings.Contains(out, "want 3, got 4") || strings.Contains(out, "one is fine") {
		t.Errorf("TestA/two's output is misattributed:\n%s", out)
	}
	if len(p.skips) != 1 || !strings.Contains(p.skips[0], "no GPU device") {
		t.Errorf("skips %q", p.skips)
	}
}

func TestShard(t *testing.T) {
	r := &runner{}
	pkgs := r.shard([]*pkgRun{{dir: "tests", bin: "tests.test", shards: []string{"TestROCm$/^fused$", "TestROCm$/^unfused$"}}, {dir: "kernels", bin: "kernels.test"}})
	var got []string
	for _, p := range pkgs {
		got = append(got, p.name()+" "+strings.Join(p.flags, " ")+" "+p.logName())
	}
	want := []string{
		"tests [TestROCm$/^fused$] -test.run TestROCm$/^fused$ tests.TestROCm_fused_.log",
		"tests [TestROCm$/^unfused$] -test.run TestROCm$/^unfused$ tests.TestROCm_unfused_.log",
		"tests [rest] -test.skip TestROCm$/^fused$|TestROCm$/^unfused$ tests.rest.log",
		"kernels  kernels.log",
	}
	if !slices.Equal(got, want) {
		t.Errorf("shards:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The binaries' own -test.skip: kept in every shard, and in the rest's.
	r.args = []string{"-test.skip", "TestSlow$"}
	pkgs = r.shard([]*pkgRun{{dir: "tests", bin: "tests.test", shards: []string{"A/x", "A/y"}}})
	if len(pkgs) != 3 || !slices.Equal(pkgs[2].flags, []string{"-test.skip", "TestSlow$|A/x|A/y"}) {
		t.Errorf("with -test.skip given: %d runs, the rest's flags %v", len(pkgs), pkgs[len(pkgs)-1].flags)
	}
	// The binaries' own -test.run: the package runs whole.
	r.args = []string{"-test.run", "TestGPU"}
	if pkgs := r.shard([]*pkgRun{{dir: "tests", bin: "tests.test", shards: []string{"A/x", "A/y"}}}); len(pkgs) != 1 || pkgs[0].flags != nil {
		t.Errorf("with -test.run given: %d runs, flags %v", len(pkgs), pkgs[0].flags)
	}
}
