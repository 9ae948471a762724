package dl

import (
	"strings"
	"sync"
	"testing"
)

// TestOpenMissing: a library that is not there gives an error naming it,
// with a reason, however the goroutines move between threads (many at
// once: dlerror's message is per thread).
func TestOpenMissing(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() {
			_, _, errs[i] = Open([]string{"libloom-no-such-lib.so.0", "libloom-no-such-lib.so.1"}, Now|Local)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			t.Fatal("opened a library that does not exist")
		}
		msg := err.Error()
		if !strings.Contains(msg, "libloom-no-such-lib.so.0") || !strings.Contains(msg, "libloom-no-such-lib.so.1") || len(msg) <= len("libloom-no-such-lib.so.0; libloom-no-such-lib.so.1")+4 {
			t.Fatalf("error %q: want both names and the loader's reasons", msg)
		}
	}
	if _, _, err := Open(nil, Now); err == nil {
		t.Error("Open of no candidates: no error")
	}
}
