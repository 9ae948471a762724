package hip

import (
	"errors"
	"fmt"
)

// Error is a failed call into a GPU library: the driver/runtime (libcuda,
// libamdhip64) or the runtime compiler (nvrtc, hiprtc). Every status code
// returned by those libraries is checked and, when it is not success, turned
// into an *Error.
type Error struct {
	Call string // C symbol that failed, e.g. "cuMemAlloc_v2"
	Code int    // status code it returned (CUresult, hipError_t, nvrtcResult, hiprtcResult)
	Name string // the library's name for Code, e.g. "CUDA_ERROR_OUT_OF_MEMORY"; "" if unknown
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "unknown error"
	}
	return fmt.Sprintf("hip: %s failed: %s (%d)", e.Call, name, e.Code)
}

var (
	// ErrClosed is returned by the methods of a Device after Close.
	ErrClosed = errors.New("hip: device is closed")

	// ErrUnsupportedArch is wrapped by Compile when the target architecture is
	// refused before the compiler library is called (see KnownAMDArch).
	ErrUnsupportedArch = errors.New("hip: unsupported target architecture")
)

// statusFunc turns a library status code into an error naming the call.
type statusFunc func(call string, rc int32) error

// newStatusFunc returns the status check of one library; name gives the
// library's name for a code.
func newStatusFunc(name func(rc int32) string) statusFunc {
	return func(call string, rc int32) error {
		if rc == 0 {
			return nil
		}
		return &Error{Call: call, Code: int(rc), Name: name(rc)}
	}
}
