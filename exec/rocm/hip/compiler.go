package hip

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Compiler is a platform's runtime compiler (hiprtc or NVRTC).
type Compiler interface {
	Platform() string // AMD or NVIDIA
	Version() string  // e.g. "hiprtc 9.0", "nvrtc 12.8"
	// Compile compiles one source file for arch and returns the code object
	// to pass to Device.LoadModule, and the compiler log. name is the program
	// (file) name used in diagnostics ("kernel" if empty); opts come after
	// the defaults, so they can override them. On a compile error err wraps
	// the failing call's *Error and includes the log.
	//
	// AMD: arch is a target ID accepted by KnownAMDArch, else Compile fails
	// with ErrUnsupportedArch without calling hiprtc; the defaults are
	// --gpu-architecture=<arch> -O3; the code object is an AMDGPU ELF.
	// NVIDIA: arch is a real architecture, sm_XX, and the code object is a
	// CUBIN (nvrtcGetCUBIN); the defaults are --gpu-architecture=<arch>,
	// --std=c++17 (unless opts set -std) and -I/usr/local/cuda/include (if
	// that directory exists).
	Compile(src, name, arch string, opts []string) (code []byte, log string, err error)
}

var compilers struct {
	sync.Mutex
	loaded map[string]Compiler
}

// LoadCompiler loads the named platform's runtime compiler (AMD or NVIDIA);
// it needs neither a device nor the driver library (AMD: hiprtc may live
// inside libamdhip64, which is then loaded but not initialized).
func LoadCompiler(name string) (Compiler, error) {
	compilers.Lock()
	defer compilers.Unlock()
	if c, ok := compilers.loaded[name]; ok {
		return c, nil
	}
	var (
		c   *rtcCompiler
		err error
	)
	switch name {
	case AMD:
		c, err = loadHiprtc()
	case NVIDIA:
		c, err = loadNVRTC()
	default:
		return nil, fmt.Errorf("hip: unknown platform %q (want %q or %q)", name, AMD, NVIDIA)
	}
	if err != nil {
		return nil, fmt.Errorf("hip: %s compiler: %w", name, err)
	}
	if compilers.loaded == nil {
		compilers.loaded = map[string]Compiler{}
	}
	compilers.loaded[name] = c
	return c, nil
}

// rtcAPI is the API shared by hiprtc and NVRTC (same shapes, different names).
type rtcAPI struct {
	version   cfunc[func(major, minor *int32) int32]
	errString cfunc[func(rc int32) string]
	create    cfunc[func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames unsafe.Pointer) int32]
	compile   cfunc[func(prog uintptr, numOptions int32, options unsafe.Pointer) int32]
	logSize   cfunc[func(prog uintptr, n *uint64) int32]
	log       cfunc[func(prog uintptr, buf *byte) int32]
	codeSize  cfunc[func(prog uintptr, n *uint64) int32]
	code      cfunc[func(prog uintptr, buf *byte) int32]
	destroy   cfunc[func(prog *uintptr) int32]
}

// rtcNames are the symbols behind rtcAPI in one library.
type rtcNames struct {
	version, errString, create, compile, logSize, log, codeSize, code, destroy string
}

func (a *rtcAPI) bind(b *binder, n rtcNames) {
	bind(b, &a.version, n.version)
	bind(b, &a.errString, n.errString)
	bind(b, &a.create, n.create)
	bind(b, &a.compile, n.compile)
	bind(b, &a.logSize, n.logSize)
	bind(b, &a.log, n.log)
	bind(b, &a.codeSize, n.codeSize)
	bind(b, &a.code, n.code)
	bind(b, &a.destroy, n.destroy)
}

type rtcCompiler struct {
	api      rtcAPI
	status   statusFunc
	platform string
	version  string
	// checkArch rejects targets before the library sees them.
	checkArch func(arch string) error
	// options returns the full option list for arch and the caller's opts.
	options func(arch string, opts []string) []string
	// serial, when set, serializes compiles (hiprtc: comgr 2.4 does not
	// document thread safety; NVRTC does, so it runs unlocked).
	serial *sync.Mutex
}

func newRTCCompiler(b *binder, names rtcNames, platform, prefix string) (*rtcCompiler, error) {
	c := &rtcCompiler{platform: platform}
	c.api.bind(b, names)
	if err := b.err(); err != nil {
		return nil, err
	}
	c.status = newStatusFunc(c.api.errString.fn)
	var major, minor int32
	if err := c.status(c.api.version.name, c.api.version.fn(&major, &minor)); err != nil {
		return nil, err
	}
	c.version = fmt.Sprintf("%s %d.%d", prefix, major, minor)
	return c, nil
}

func (c *rtcCompiler) Platform() string { return c.platform }
func (c *rtcCompiler) Version() string  { return c.version }

func (c *rtcCompiler) Compile(src, name, arch string, opts []string) (code []byte, log string, err error) {
	if err := c.checkArch(arch); err != nil {
		return nil, "", err
	}
	if name == "" {
		name = "kernel"
	}
	if c.serial != nil {
		c.serial.Lock()
		defer c.serial.Unlock()
	}
	a := &c.api
	var prog uintptr
	if err := c.status(a.create.name, a.create.fn(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer func() {
		if derr := c.status(a.destroy.name, a.destroy.fn(&prog)); derr != nil && err == nil {
			code, err = nil, derr
		}
	}()

	compileErr := c.compileProgram(prog, c.options(arch, opts))
	log, err = c.programLog(prog)
	if err != nil {
		return nil, "", err
	}
	if compileErr != nil {
		return nil, log, fmt.Errorf("%w (%s for %s):\n%s", compileErr, name, arch, log)
	}
	var n uint64
	if err := c.status(a.codeSize.name, a.codeSize.fn(prog, &n)); err != nil {
		return nil, log, err
	}
	if n == 0 {
		return nil, log, fmt.Errorf("hip: %s returned an empty code object for %s", a.codeSize.name, arch)
	}
	code = make([]byte, n)
	if err := c.status(a.code.name, a.code.fn(prog, &code[0])); err != nil {
		return nil, log, err
	}
	return code, log, nil
}

// compileProgram runs the compile call. The option strings are NUL-terminated
// Go copies; the array of pointers to them is Go memory holding Go pointers,
// so it and the strings stay pinned during the call.
func (c *rtcCompiler) compileProgram(prog uintptr, opts []string) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		b := append([]byte(o), 0)
		pin.Pin(&b[0])
		ptrs[i] = &b[0]
	}
	var arr unsafe.Pointer
	if len(ptrs) > 0 {
		pin.Pin(&ptrs[0])
		arr = unsafe.Pointer(&ptrs[0])
	}
	return c.status(c.api.compile.name, c.api.compile.fn(prog, int32(len(opts)), arr))
}

func (c *rtcCompiler) programLog(prog uintptr) (string, error) {
	a := &c.api
	var n uint64
	if err := c.status(a.logSize.name, a.logSize.fn(prog, &n)); err != nil {
		return "", err
	}
	if n <= 1 { // the size counts the terminating NUL
		return "", nil
	}
	buf := make([]byte, n)
	if err := c.status(a.log.name, a.log.fn(prog, &buf[0])); err != nil {
		return "", err
	}
	return strings.TrimRight(bufString(buf), "\n"), nil
}

// hiprtc: ROCm 6 ships libhiprtc; ROCm 5 exports hiprtc from libamdhip64.
var (
	hiprtcLibs  = []string{"libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"}
	hiprtcNames = rtcNames{
		version: "hiprtcVersion", errString: "hiprtcGetErrorString",
		create: "hiprtcCreateProgram", compile: "hiprtcCompileProgram",
		logSize: "hiprtcGetProgramLogSize", log: "hiprtcGetProgramLog",
		codeSize: "hiprtcGetCodeSize", code: "hiprtcGetCode",
		destroy: "hiprtcDestroyProgram",
	}
)

func loadHiprtc() (*rtcCompiler, error) {
	var why []string
	for _, lib := range slices.Concat(hiprtcLibs, amdLibs) {
		h, path, err := dlopen([]string{lib})
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		b := &binder{lib: h, path: path}
		c, err := newRTCCompiler(b, hiprtcNames, AMD, "hiprtc")
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		c.serial = new(sync.Mutex)
		c.checkArch = func(arch string) error {
			if !KnownAMDArch(arch) {
				return fmt.Errorf("%w: %q is not an ISA comgr 2.4 knows (hiprtc would abort the process)", ErrUnsupportedArch, arch)
			}
			return nil
		}
		c.options = func(arch string, opts []string) []string {
			return append([]string{"--gpu-architecture=" + arch, "-O3"}, opts...)
		}
		return c, nil
	}
	return nil, fmt.Errorf("no hiprtc: %s", strings.Join(why, "; "))
}

// NVRTC.
var (
	nvrtcLibs  = withCUDALibDir("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
	nvrtcNames = rtcNames{
		version: "nvrtcVersion", errString: "nvrtcGetErrorString",
		create: "nvrtcCreateProgram", compile: "nvrtcCompileProgram",
		logSize: "nvrtcGetProgramLogSize", log: "nvrtcGetProgramLog",
		codeSize: "nvrtcGetCUBINSize", code: "nvrtcGetCUBIN",
		destroy: "nvrtcDestroyProgram",
	}
	// smArch is a real (SASS) architecture, for which NVRTC emits a CUBIN.
	smArch = regexp.MustCompile(`^sm_[0-9]+[a-z]?$`)
)

// cudaInclude is the CUDA toolkit's header directory, added to NVRTC's
// include path when it exists.
const cudaInclude = "/usr/local/cuda/include"

func loadNVRTC() (*rtcCompiler, error) {
	h, path, err := dlopen(nvrtcLibs)
	if err != nil {
		return nil, err
	}
	c, err := newRTCCompiler(&binder{lib: h, path: path}, nvrtcNames, NVIDIA, "nvrtc")
	if err != nil {
		return nil, err
	}
	var include []string
	if fi, err := os.Stat(cudaInclude); err == nil && fi.IsDir() {
		include = []string{"-I" + cudaInclude}
	}
	c.checkArch = func(arch string) error {
		if !smArch.MatchString(arch) {
			return fmt.Errorf("%w: %q: NVIDIA compiles need a real architecture sm_XX (CUBIN output)", ErrUnsupportedArch, arch)
		}
		return nil
	}
	c.options = func(arch string, opts []string) []string {
		all := append([]string{"--gpu-architecture=" + arch}, include...)
		if !slices.ContainsFunc(opts, isStdOption) {
			all = append(all, "--std=c++17")
		}
		return append(all, opts...)
	}
	return c, nil
}

// isStdOption reports whether o selects the C++ dialect (-std=..., --std=...,
// -std ...).
func isStdOption(o string) bool {
	return strings.HasPrefix(o, "-std") || strings.HasPrefix(o, "--std")
}
