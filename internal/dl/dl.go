// Package dl opens shared libraries at run time with purego (no cgo), for
// the packages that load vendor libraries — the GPU platform layer
// (exec/rocm/hip: libcuda, NVRTC, cuBLAS, cuDNN, NCCL, HIP) and the CPU's
// BLAS (blas: OpenBLAS) — so that a missing library is an error naming it
// and saying why, never a crash.
//
// dlerror's message is per OS thread: Open keeps the goroutine on one
// thread from dlopen to dlerror, since a goroutine moved between them
// reads another thread's (usually empty) message — seen once as a CI
// failure of blas.TestDlopenError, an error with no text. A failure with
// no message from the loader still names the library.
package dl

import (
	"errors"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// The dlopen flags Open takes (purego's, which are the platform's).
const (
	Now    = purego.RTLD_NOW
	Local  = purego.RTLD_LOCAL
	Global = purego.RTLD_GLOBAL
)

// Open opens the first loadable library of candidates with flags and
// returns its handle and the candidate that loaded. The error lists every
// attempt with the loader's reason.
func Open(candidates []string, flags int) (handle uintptr, path string, err error) {
	var why []string
	for _, c := range candidates {
		h, err := open(c, flags)
		if err == nil {
			return h, c, nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return 0, "", errors.New("no library to open")
	}
	return 0, "", errors.New(strings.Join(why, "; "))
}

// open is purego.Dlopen on one OS thread, its error naming the library.
func open(name string, flags int) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(name, flags)
	if err == nil {
		return h, nil
	}
	msg := err.Error()
	if msg == "" {
		return 0, errors.New(name + ": cannot be loaded (the loader gave no reason)")
	}
	if !strings.Contains(msg, name) {
		msg = name + ": " + msg
	}
	return 0, errors.New(msg)
}
