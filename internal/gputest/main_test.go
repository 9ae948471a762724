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
