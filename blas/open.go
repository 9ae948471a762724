package blas

// Backend choice. Decisions:
//   - OpenBLAS when it loads, else gonum: a missing library is never an
//     error, and the returned string says which backend runs and why, for
//     the executor to log.
//   - LOOM_BLAS=gonum forces gonum (to compare backends, or to keep
//     OpenBLAS's threads out of a process); LOOM_BLAS=openblas or unset
//     means the default choice. Other values are reported and ignored.

import (
	"fmt"
	"os"
)

// EnvBackend names the environment variable that forces a host backend:
// LOOM_BLAS=gonum selects gonum even when OpenBLAS is installed.
const EnvBackend = "LOOM_BLAS"

// Open returns the host backend for an executor with threads workers:
// OpenBLAS when libopenblas loads, else gonum (always, if LOOM_BLAS=gonum),
// and a line saying which and why.
func Open(threads int) (Host, string) {
	note := ""
	switch v := os.Getenv(EnvBackend); v {
	case "gonum":
		h := OpenGonum(threads)
		return h, fmt.Sprintf("%s: %s=gonum", h.Name(), EnvBackend)
	case "", "openblas":
	default:
		note = fmt.Sprintf(" (%s=%q ignored: want gonum or openblas)", EnvBackend, v)
	}
	h, err := OpenOpenBLAS(threads)
	if err != nil {
		g := OpenGonum(threads)
		return g, fmt.Sprintf("openblas: %v; using %s%s", err, g.Name(), note)
	}
	return h, h.Name() + note
}
