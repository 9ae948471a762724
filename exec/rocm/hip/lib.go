package hip

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/loomgraph/loom/internal/dl"
)

// cudaLibDir is where CUDA toolkits install their libraries; it is tried after
// the dynamic loader's own search path (LD_LIBRARY_PATH, ld.so.cache).
const cudaLibDir = "/usr/local/cuda/lib64"

// dlopen opens the first loadable library of candidates, with the flags of
// the purego probe in hip-toolchain.md that validated hiprtc this way
// (RTLD_NOW|RTLD_GLOBAL). The error lists every attempt, as dlerror reported
// it.
func dlopen(candidates []string) (handle uintptr, path string, err error) {
	return dl.Open(candidates, dl.Now|dl.Global)
}

// withCUDALibDir returns names followed by the same names under cudaLibDir.
func withCUDALibDir(names ...string) []string {
	out := append([]string(nil), names...)
	for _, n := range names {
		out = append(out, cudaLibDir+"/"+n)
	}
	return out
}

// cfunc is a C function bound with purego, together with its symbol name,
// which error messages report.
type cfunc[F any] struct {
	name string
	fn   F
	sym  uintptr // the symbol's address, for raw (integer-only) calls
}

// raw calls the function with integer and pointer arguments through
// purego.SyscallN, without the reflection behind fn: ~0.25 µs a call where
// fn costs ~1.5–2 µs (measured on the CI machine's CPU). The hot calls of a
// run (kernel launches, making the context current) use it; a pointer
// passed as a uintptr must be kept alive and unmoved by the caller (pinned
// or outside the Go heap). The result is the C function's int32 status.
func (f *cfunc[F]) raw(args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(f.sym, args...)
	return int32(r)
}

// binder binds the symbols of one library and collects the missing ones, so
// that a library lacking a symbol gives an error rather than a panic.
type binder struct {
	lib     uintptr
	path    string
	missing []string
}

func bind[F any](b *binder, f *cfunc[F], name string) {
	sym, err := purego.Dlsym(b.lib, name)
	if err != nil {
		b.missing = append(b.missing, name)
		return
	}
	f.name = name
	f.sym = sym
	purego.RegisterFunc(&f.fn, sym)
}

func (b *binder) err() error {
	if len(b.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s lacks %s", b.path, strings.Join(b.missing, ", "))
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// bufString returns the text of a NUL-terminated string written into buf.
func bufString(buf []byte) string {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}
