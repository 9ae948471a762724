package hip

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

var amdLibs = []string{"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}

var hipNames = runtimeNames{
	malloc: "hipMalloc", free: "hipFree",
	htod: "hipMemcpyHtoDAsync", dtoh: "hipMemcpyDtoHAsync", dtod: "hipMemcpyDtoDAsync",
	memsetD8: "hipMemsetD8Async", memsetD32: "hipMemsetD32Async",
	streamCreate: "hipStreamCreateWithFlags", streamSync: "hipStreamSynchronize", streamDestroy: "hipStreamDestroy",
	moduleLoadData: "hipModuleLoadData", moduleGetFunction: "hipModuleGetFunction",
	moduleUnload: "hipModuleUnload", launchKernel: "hipModuleLaunchKernel",
	eventCreate: "hipEventCreateWithFlags", eventRecord: "hipEventRecord", eventSync: "hipEventSynchronize",
	eventElapsed: "hipEventElapsedTime", eventDestroy: "hipEventDestroy", eventQuery: "hipEventQuery",
	memGetInfo: "hipMemGetInfo", occupancy: "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
}

const (
	// hipDeviceAttribute_t values. The ROCm 5.2 and 6.x headers number the
	// enum identically up to here (6.x only renamed hipDeviceAttributeName
	// and hipDeviceAttributeUuid to Unused1 and Unused2).
	hipAttrMultiprocessorCount = 63
	hipAttrWarpSize            = 87

	hipErrorNoDevice = 100
)

// Where gcnArchName lies in hipDeviceProp_t. This path has not run on an AMD
// GPU; the offsets were computed with gcc (offsetof, x86-64) from the public
// headers:
//   - ROCm 5.x: hipGetDeviceProperties fills the original layout (Debian's
//     libamdhip64-dev 5.2.3 hip_runtime_api.h): sizeof 792, gcnArchName at 396.
//   - ROCm 6.x: the header maps hipGetDeviceProperties to the versioned
//     symbol hipGetDevicePropertiesR0600 and hipDeviceProp_t to
//     hipDeviceProp_tR0600 (ROCm/HIP hip_runtime_api.h, 6.x): sizeof 1472,
//     gcnArchName at 1160. Versioned layouts are frozen, so this also holds
//     for later runtimes that keep exporting the R0600 symbol.
//
// loadAMD picks the R0600 symbol when the library exports it. The buffer is
// larger than either struct, so a layout mismatch cannot overrun it.
const (
	propsArchOffsetR0000 = 396
	propsArchOffsetR0600 = 1160
	propsBufSize         = 4096
	archNameLen          = 256
)

type amdPlatform struct {
	api  runtimeAPI
	path string // the library loaded

	initErr         error // hipInit's status; on a machine without a GPU 101 (hipErrorInvalidDevice)
	getDeviceCount  cfunc[func(n *int32) int32]
	deviceGet       cfunc[func(dev *int32, ordinal int32) int32]
	deviceGetName   cfunc[func(name *byte, n int32, dev int32) int32]
	deviceGetAttr   cfunc[func(v *int32, attr int32, dev int32) int32]
	deviceTotalMem  cfunc[func(n *uint64, dev int32) int32]
	getDeviceProps  cfunc[func(props unsafe.Pointer, dev int32) int32]
	propsArchOffset int
	setDevice       cfunc[func(dev int32) int32]
}

func loadAMD() (*amdPlatform, error) {
	h, path, err := dlopen(amdLibs)
	if err != nil {
		return nil, err
	}
	p := &amdPlatform{path: path}
	b := &binder{lib: h, path: path}
	var (
		hipInit         cfunc[func(flags uint32) int32]
		hipGetErrorName cfunc[func(rc int32) string]
	)
	bind(b, &hipInit, "hipInit")
	bind(b, &hipGetErrorName, "hipGetErrorName")
	bind(b, &p.getDeviceCount, "hipGetDeviceCount")
	bind(b, &p.deviceGet, "hipDeviceGet")
	bind(b, &p.deviceGetName, "hipDeviceGetName")
	bind(b, &p.deviceGetAttr, "hipDeviceGetAttribute")
	bind(b, &p.deviceTotalMem, "hipDeviceTotalMem")
	bind(b, &p.setDevice, "hipSetDevice")
	p.propsArchOffset = propsArchOffsetR0000
	props := "hipGetDeviceProperties"
	if _, err := purego.Dlsym(h, "hipGetDevicePropertiesR0600"); err == nil {
		p.propsArchOffset = propsArchOffsetR0600
		props = "hipGetDevicePropertiesR0600"
	}
	bind(b, &p.getDeviceProps, props)
	p.api.bind(b, hipNames)
	if err := b.err(); err != nil {
		return nil, err
	}
	p.api.graph.bind(h, path, hipGraphNames)
	p.api.host.bind(h, path, hipHostNames)
	p.api.status = newStatusFunc(hipGetErrorName.fn)
	p.initErr = p.api.status(hipInit.name, hipInit.fn(0))
	return p, nil
}

func (p *amdPlatform) Name() string { return AMD }

func (p *amdPlatform) library() string { return p.path }

func (p *amdPlatform) Compiler() (Compiler, error) { return LoadCompiler(AMD) }

func (p *amdPlatform) DeviceCount() (int, error) {
	var n int32
	switch rc := p.getDeviceCount.fn(&n); rc {
	case 0:
		return int(n), nil
	case hipErrorNoDevice:
		return 0, nil
	default:
		return 0, errors.Join(p.initErr, p.api.status(p.getDeviceCount.name, rc))
	}
}

func (p *amdPlatform) DeviceInfo(i int) (DeviceInfo, error) {
	if err := checkIndex(p, i); err != nil {
		return DeviceInfo{}, err
	}
	st := p.api.status
	info := DeviceInfo{Index: i, Platform: AMD}
	var dev, wave, cus int32
	if err := st(p.deviceGet.name, p.deviceGet.fn(&dev, int32(i))); err != nil {
		return info, err
	}
	name := make([]byte, 256)
	if err := st(p.deviceGetName.name, p.deviceGetName.fn(&name[0], int32(len(name)), dev)); err != nil {
		return info, err
	}
	info.Name = bufString(name)
	if err := st(p.deviceGetAttr.name, p.deviceGetAttr.fn(&wave, hipAttrWarpSize, int32(i))); err != nil {
		return info, err
	}
	if err := st(p.deviceGetAttr.name, p.deviceGetAttr.fn(&cus, hipAttrMultiprocessorCount, int32(i))); err != nil {
		return info, err
	}
	info.WaveSize, info.MultiProcessors = int(wave), int(cus)
	if err := st(p.deviceTotalMem.name, p.deviceTotalMem.fn(&info.TotalMem, dev)); err != nil {
		return info, err
	}
	props := make([]byte, propsBufSize)
	if err := st(p.getDeviceProps.name, p.getDeviceProps.fn(unsafe.Pointer(&props[0]), int32(i))); err != nil {
		return info, err
	}
	info.Arch = bufString(props[p.propsArchOffset : p.propsArchOffset+archNameLen])
	if info.Arch == "" {
		return info, fmt.Errorf("hip: %s: empty gcnArchName for device %d", p.getDeviceProps.name, i)
	}
	return info, nil
}

// OpenDevice opens device i. Making it current is hipSetDevice(i), which only
// sets the calling thread's device; Close has nothing to release.
func (p *amdPlatform) OpenDevice(i int) (*Device, error) {
	info, err := p.DeviceInfo(i)
	if err != nil {
		return nil, err
	}
	return &Device{
		api:  &p.api,
		info: info,
		setCurrent: func() error {
			return p.api.status(p.setDevice.name, p.setDevice.raw(uintptr(i)))
		},
	}, nil
}
