// Package hip is Loom's GPU platform layer: a HIP-shaped driver API (devices,
// memory, streams, events, modules, kernel launches) plus a runtime compiler,
// with two implementations chosen at run time:
//
//   - AMD: libamdhip64 (.so.6, .so.5, .so) and hiprtc, from libhiprtc
//     (.so.6, .so.5, .so) or, on ROCm 5.x, from inside libamdhip64.
//   - NVIDIA (HIP's NVIDIA platform, spoken directly): the driver API in
//     libcuda.so.1 and NVRTC in libnvrtc (.so.13, .so.12, .so). Both are
//     looked up through the dynamic loader first, then in
//     /usr/local/cuda/lib64.
//
// Beside the platform, the vendor libraries each capability needs are
// loaded the same way when first used, each optional (its absence is an
// error the caller falls back from): BLAS (cuBLAS, rocBLAS: blas.go), the
// convolution library (cuDNN: dnn.go), graphs for replays (graph.go),
// pinned host memory for fast copies to the host (pinned.go; the runtime's
// own entry points, optional like the graphs') and the collective library
// for several GPUs (NCCL, RCCL: nccl.go).
//
// The libraries are opened with purego, so the package builds with
// CGO_ENABLED=0 and needs no GPU SDK at build time. The binary is still
// dynamically linked against glibc (dlopen needs the dynamic loader), so it
// does not run in static/musl-only images. The code assumes a 64-bit
// little-endian Linux (size_t is uint64; see Args).
//
// # Loading
//
// Load returns the first platform whose library loads and reports at least
// one device, trying AMD then NVIDIA; its error explains every attempt.
// LoadPlatform loads one platform even without a device (DeviceCount is then
// 0 with no error), and LoadCompiler loads only a compiler, for compile-only
// use such as CI (ROCm 5.2's hiprtc works on a machine without a GPU).
// Libraries are loaded once per process and never unloaded.
//
// # Errors
//
// The status of every library call is checked; a failure becomes an *Error
// carrying the C symbol, the status code and the library's name for it, e.g.
// "hip: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)". Errors detected
// before a call (closed device, refused architecture, unloaded module) are
// plain errors; ErrClosed and ErrUnsupportedArch can be matched with
// errors.Is.
//
// # Threads and concurrency
//
// Both APIs keep the current device (HIP) or context (CUDA) per OS thread,
// and goroutines move between threads. Every Device method therefore locks
// its goroutine to the OS thread for the duration of the call, makes the
// device current there and then calls the library: NVIDIA with
// cuCtxSetCurrent on the device's primary context (retained by OpenDevice,
// released by Close), AMD with hipSetDevice. Both only set a thread-local, so
// this costs far less than the calls it precedes, and no thread is left with
// state that matters. A Device is safe for concurrent use: the vendor APIs are
// thread-safe, so calls run in parallel under a read lock, and only Close and
// UnloadModule take it exclusively.
//
// # Memory and asynchrony
//
// MemcpyDtoD, MemsetD8, MemsetD32 and Launch only enqueue work on their
// stream. MemcpyHtoD and MemcpyDtoH are ordered on their stream like the
// rest, but are synchronous with respect to host memory: they wait for the
// stream to drain before returning, because the host side is ordinary
// (pageable, garbage-collected) Go memory that must not be touched by the GPU
// after the call. Go memory that the C side sees during a call (host buffers,
// the kernel-argument array and values, compiler option strings) is pinned
// with runtime.Pinner for the call; a loaded module keeps a copy of its code
// object, in an anonymous mapping outside the Go heap, until UnloadModule,
// since hipModuleLoadData may refer to the image after it returns.
//
// LaunchDep is Launch with programmatic dependence on the kernel ahead in
// the stream (cuLaunchKernelEx's programmatic stream serialization, NVIDIA
// sm_90+; elsewhere, or where the driver lacks cuLaunchKernelEx, it is
// Launch, and CanLaunchDep says which): the kernel's blocks may be resident
// before the kernel ahead has finished, so the kernel itself must wait
// (griddepcontrol.wait) before its first memory access. Loom's kernels all
// begin with that wait (codegen's loom_grid_entry).
//
// # Compiling
//
// Compiler.Compile turns one source into a code object for Device.LoadModule.
// Declare kernels extern "C" so that Module.Function finds them by name.
//
// AMD: ROCm 5.2's hiprtc aborts the process (SIGABRT inside comgr) when asked
// for an ISA its comgr 2.4 does not know, so Compile first checks the target
// with KnownAMDArch and refuses anything else with ErrUnsupportedArch. This
// refuses gfx940/gfx942/gfx950/gfx11xx/gfx12xx even on newer ROCm releases
// whose comgr would know them. Compiles are serialized, since comgr 2.4 does
// not document thread safety. hiprtc 5.2 predefines only the 32- and 64-bit
// <stdint.h> types (uint32_t, int64_t, ...); including <stdint.h> conflicts
// with them, so sources declare narrower types themselves (typedef unsigned
// short uint16_t;).
//
// NVIDIA: the target must be a real architecture, sm_XX, and the result is a
// CUBIN (nvrtcGetCUBIN), not PTX, so nothing is JIT-compiled at load time.
//
// # AMD device properties
//
// The AMD architecture name (gcnArchName) comes from hipGetDeviceProperties,
// whose struct changed between ROCm 5 and 6; amd.go documents the offsets
// used and where they come from. That path could not be run without an AMD
// GPU.
package hip
