package hip

import (
	"runtime"
	"unsafe"
)

// Programmatic dependent launch (CUDA 12+, sm_90+): LaunchDep launches a
// kernel with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so that
// its blocks may become resident while the kernel ahead of it in the stream
// still runs. Stream order is then the kernel's job: it must execute
// griddepcontrol.wait before its first load or store of anything the kernel
// ahead writes or reads (codegen's loom_grid_entry, which every Loom kernel
// begins with). The launch processing and the block scheduling of the next
// kernel overlap the running one's tail; in a captured graph the edge is a
// programmatic one. Measured where it is used (exec/rocm, LOOM_GPU_PDL).

// cuLaunchAttributeProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h).
const cuLaunchAttributeProgrammaticStreamSerialization = 6

// launchAttr is CUlaunchAttribute: the id, padding to 8 bytes, and the
// 64-byte CUlaunchAttributeValue union (programmaticStreamSerializationAllowed
// is its first int).
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// launchConfig is CUlaunchConfig.
type launchConfig struct {
	grid, block [3]uint32
	sharedMem   uint32
	_           uint32
	stream      Stream
	attrs       *launchAttr
	numAttrs    uint32
	_           uint32
}

// The layouts cuda.h gives these structs on 64-bit Linux.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(launchAttr{})-72]
	_ = [1]struct{}{}[unsafe.Sizeof(launchConfig{})-56]
	_ = [1]struct{}{}[unsafe.Offsetof(launchConfig{}.stream)-32]
)

// CanLaunchDep reports whether LaunchDep launches with programmatic
// dependence (an NVIDIA GPU of compute capability 9.0 or newer whose driver
// has cuLaunchKernelEx); where it does not, LaunchDep is Launch.
func (d *Device) CanLaunchDep() bool { return d.launchDep }

// LaunchDep is Launch with programmatic dependence on the stream's previous
// kernel, where the device has it (CanLaunchDep). f must begin with
// codegen's loom_grid_entry(), before any memory access: a kernel without
// the wait could read what the kernel ahead has not yet written. (The
// exception, codegen's loom_grid_defer: a kernel that reads a constant the
// kernel ahead does not write before it waits.)
func (d *Device) LaunchDep(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, args *Args) error {
	return d.launch("LaunchDep", d.launchDep, f, grid, block, sharedMem, s, args)
}

// depConfig is the pinned launch configuration of a LaunchDep.
func depConfig(grid, block [3]uint32, sharedMem uint32, s Stream, pin *runtime.Pinner) *launchConfig {
	attr := &launchAttr{id: cuLaunchAttributeProgrammaticStreamSerialization}
	attr.value[0] = 1 // programmaticStreamSerializationAllowed
	cfg := &launchConfig{grid: grid, block: block, sharedMem: sharedMem, stream: s, attrs: attr, numAttrs: 1}
	pin.Pin(attr)
	pin.Pin(cfg)
	return cfg
}
