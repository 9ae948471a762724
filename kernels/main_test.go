package kernels

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the host emulators' build folders (each built once and
// shared by the tests that use it) after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, prog := range []string{quantEmu.prog, gemvEmu.prog, gemmEmu.prog, convEmu.prog} {
		if prog != "" {
			os.RemoveAll(filepath.Dir(prog))
		}
	}
	os.Exit(code)
}
