package kernels

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/tensor"
)

// emuTable is the C++ table name[] of {name, fn} rows that a program's
// main looks its entries up in (hostemu's loom_find): one row an entry,
// its function the wrapper prefix+entry.
func emuTable(name, prefix string, entries []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "static const struct { const char* name; void (*fn)(void*); } %s[] = {\n", name)
	for _, e := range entries {
		fmt.Fprintf(&b, "  {\"%s\", %s%s},\n", e, prefix, e)
	}
	b.WriteString("};\n")
	return b.String()
}

// emuBytes is values v stored as dt (rounded to it), the bytes an emulated
// kernel reads.
func emuBytes(t *testing.T, dt dtype.DType, v []float64) []byte {
	t.Helper()
	tt, err := tensor.FromFloat64s(dt, v, len(v))
	if err != nil {
		t.Fatal(err)
	}
	return tt.Bytes()
}

// emuValues is the values of dt an emulated kernel wrote as raw bytes.
func emuValues(t *testing.T, dt dtype.DType, raw []byte) []float64 {
	t.Helper()
	tt, err := tensor.Zeros(dt, len(raw)/dt.Size())
	if err != nil {
		t.Fatal(err)
	}
	copy(tt.Bytes(), raw) // Bytes shares the tensor's memory
	return tt.Float64s()
}

// emuProg is a host-emulation program (hostemu.Build), built on first use
// and shared by the tests that use it.
type emuProg struct {
	once sync.Once
	prog string
	err  error
}

// emuProgs are every emuProg, for TestMain to remove their folders.
var emuProgs []*emuProg

func newEmuProg() *emuProg {
	p := &emuProg{}
	emuProgs = append(emuProgs, p)
	return p
}

// get builds the program from src() once and returns its path. Without a
// host C++ compiler the test skips, unless CI=true.
func (p *emuProg) get(t *testing.T, src func() (string, error)) string {
	t.Helper()
	p.once.Do(func() {
		var code string
		if code, p.err = src(); p.err == nil {
			p.prog, p.err = hostemu.Build("", code)
		}
	})
	if p.err != nil {
		if strings.HasPrefix(p.err.Error(), "no host C++ compiler") && os.Getenv("CI") != "true" {
			t.Skipf("host emulation skipped: %v", p.err)
		}
		t.Fatalf("building the host emulator: %v", firstLines(p.err.Error(), 30))
	}
	return p.prog
}

// TestMain removes the host emulators' build folders after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, p := range emuProgs {
		if p.prog != "" {
			os.RemoveAll(filepath.Dir(p.prog))
		}
	}
	os.Exit(code)
}
