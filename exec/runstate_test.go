package exec

import (
	"context"
	"errors"
	"testing"
)

// TestRunState: deferred checks run in order and stop at the first error;
// releases run on every path, last first; Local makes one value per key;
// outside a run DeferCheck registers nothing.
func TestRunState(t *testing.T) {
	if DeferCheck(context.Background(), func() error { return nil }, nil) {
		t.Fatal("DeferCheck without a run state reported true")
	}
	ctx, s := withRunState(context.Background())
	var order []string
	DeferCheck(ctx, func() error { order = append(order, "c1"); return nil }, func() { order = append(order, "r1") })
	DeferCheck(ctx, func() error { order = append(order, "c2"); return errors.New("bad id") }, func() { order = append(order, "r2") })
	DeferCheck(ctx, func() error { order = append(order, "c3"); return nil }, nil)
	n := 0
	for range 3 {
		RunStateOf(ctx).Local("k", func() any { n++; return n })
	}
	if n != 1 {
		t.Errorf("Local made %d values, want 1", n)
	}
	if err := s.check(); err == nil || err.Error() != "bad id" {
		t.Errorf("check = %v, want bad id", err)
	}
	s.release()
	want := []string{"c1", "c2", "r2", "r1"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}
