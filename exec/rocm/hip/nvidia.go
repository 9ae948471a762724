package hip

import (
	"fmt"
	"strconv"
	"strings"
)

// libcuda comes with the driver (ld.so.cache); cudaLibDir is a fallback.
var nvidiaLibs = withCUDALibDir("libcuda.so.1")

var cudaNames = runtimeNames{
	malloc: "cuMemAlloc_v2", free: "cuMemFree_v2",
	htod: "cuMemcpyHtoDAsync_v2", dtoh: "cuMemcpyDtoHAsync_v2", dtod: "cuMemcpyDtoDAsync_v2",
	memsetD8: "cuMemsetD8Async", memsetD32: "cuMemsetD32Async",
	streamCreate: "cuStreamCreate", streamSync: "cuStreamSynchronize", streamDestroy: "cuStreamDestroy_v2",
	moduleLoadData: "cuModuleLoadData", moduleGetFunction: "cuModuleGetFunction",
	moduleUnload: "cuModuleUnload", launchKernel: "cuLaunchKernel",
	eventCreate: "cuEventCreate", eventRecord: "cuEventRecord", eventSync: "cuEventSynchronize",
	eventElapsed: "cuEventElapsedTime", eventDestroy: "cuEventDestroy_v2", eventQuery: "cuEventQuery",
	memGetInfo: "cuMemGetInfo_v2", occupancy: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
}

// CUdevice_attribute values and CUresult codes (cuda.h).
const (
	cuAttrWarpSize            = 10
	cuAttrMultiprocessorCount = 16
	cuAttrComputeCapMajor     = 75
	cuAttrComputeCapMinor     = 76
	cudaErrorNoDevice         = 100
)

type nvidiaPlatform struct {
	api  runtimeAPI
	path string // the library loaded

	initRC         int32 // cuInit's status; CUDA_ERROR_NO_DEVICE means zero devices
	initErr        error
	getDeviceCount cfunc[func(n *int32) int32]
	deviceGet      cfunc[func(dev *int32, ordinal int32) int32]
	deviceGetName  cfunc[func(name *byte, n int32, dev int32) int32]
	deviceGetAttr  cfunc[func(v *int32, attr int32, dev int32) int32]
	deviceTotalMem cfunc[func(n *uint64, dev int32) int32]
	ctxRetain      cfunc[func(ctx *uintptr, dev int32) int32]
	ctxRelease     cfunc[func(dev int32) int32]
	ctxSetCurrent  cfunc[func(ctx uintptr) int32]
}

func loadNVIDIA() (*nvidiaPlatform, error) {
	h, path, err := dlopen(nvidiaLibs)
	if err != nil {
		return nil, err
	}
	p := &nvidiaPlatform{path: path}
	b := &binder{lib: h, path: path}
	var (
		cuInit         cfunc[func(flags uint32) int32]
		cuGetErrorName cfunc[func(rc int32, name **byte) int32]
	)
	bind(b, &cuInit, "cuInit")
	bind(b, &cuGetErrorName, "cuGetErrorName")
	bind(b, &p.getDeviceCount, "cuDeviceGetCount")
	bind(b, &p.deviceGet, "cuDeviceGet")
	bind(b, &p.deviceGetName, "cuDeviceGetName")
	bind(b, &p.deviceGetAttr, "cuDeviceGetAttribute")
	bind(b, &p.deviceTotalMem, "cuDeviceTotalMem_v2")
	bind(b, &p.ctxRetain, "cuDevicePrimaryCtxRetain")
	bind(b, &p.ctxRelease, "cuDevicePrimaryCtxRelease_v2")
	bind(b, &p.ctxSetCurrent, "cuCtxSetCurrent")
	p.api.bind(b, cudaNames)
	if err := b.err(); err != nil {
		return nil, err
	}
	p.api.graph.bind(h, path, cudaGraphNames)
	p.api.host.bind(h, path, cudaHostNames)
	// Optional: programmatic dependent launches (launchdep.go).
	bind(&binder{lib: h, path: path}, &p.api.launchEx, "cuLaunchKernelEx")
	p.api.status = newStatusFunc(func(rc int32) string {
		var name *byte
		if cuGetErrorName.fn(rc, &name) != 0 {
			return ""
		}
		return cString(name)
	})
	p.initRC = cuInit.fn(0)
	p.initErr = p.api.status(cuInit.name, p.initRC)
	return p, nil
}

func (p *nvidiaPlatform) Name() string { return NVIDIA }

func (p *nvidiaPlatform) library() string { return p.path }

func (p *nvidiaPlatform) Compiler() (Compiler, error) { return LoadCompiler(NVIDIA) }

func (p *nvidiaPlatform) DeviceCount() (int, error) {
	switch {
	case p.initRC == cudaErrorNoDevice:
		return 0, nil
	case p.initErr != nil:
		return 0, p.initErr
	}
	var n int32
	if err := p.api.status(p.getDeviceCount.name, p.getDeviceCount.fn(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (p *nvidiaPlatform) DeviceInfo(i int) (DeviceInfo, error) {
	if err := checkIndex(p, i); err != nil {
		return DeviceInfo{}, err
	}
	st := p.api.status
	info := DeviceInfo{Index: i, Platform: NVIDIA}
	var dev int32
	if err := st(p.deviceGet.name, p.deviceGet.fn(&dev, int32(i))); err != nil {
		return info, err
	}
	name := make([]byte, 256)
	if err := st(p.deviceGetName.name, p.deviceGetName.fn(&name[0], int32(len(name)), dev)); err != nil {
		return info, err
	}
	info.Name = bufString(name)
	attrs := []struct {
		attr int32
		v    int32
	}{{attr: cuAttrComputeCapMajor}, {attr: cuAttrComputeCapMinor}, {attr: cuAttrWarpSize}, {attr: cuAttrMultiprocessorCount}}
	for k := range attrs {
		if err := st(p.deviceGetAttr.name, p.deviceGetAttr.fn(&attrs[k].v, attrs[k].attr, dev)); err != nil {
			return info, err
		}
	}
	info.Arch = fmt.Sprintf("sm_%d%d", attrs[0].v, attrs[1].v)
	info.WaveSize, info.MultiProcessors = int(attrs[2].v), int(attrs[3].v)
	if err := st(p.deviceTotalMem.name, p.deviceTotalMem.fn(&info.TotalMem, dev)); err != nil {
		return info, err
	}
	return info, nil
}

// OpenDevice opens device i: it retains the device's primary context (the one
// the CUDA runtime shares), which each call makes current with
// cuCtxSetCurrent; Close releases it.
func (p *nvidiaPlatform) OpenDevice(i int) (*Device, error) {
	info, err := p.DeviceInfo(i)
	if err != nil {
		return nil, err
	}
	var dev int32
	if err := p.api.status(p.deviceGet.name, p.deviceGet.fn(&dev, int32(i))); err != nil {
		return nil, err
	}
	var ctx uintptr
	if err := p.api.status(p.ctxRetain.name, p.ctxRetain.fn(&ctx, dev)); err != nil {
		return nil, err
	}
	// Arch is sm_<major><minor>, the minor one digit.
	cc, _ := strconv.Atoi(strings.TrimPrefix(info.Arch, "sm_"))
	return &Device{
		api:       &p.api,
		info:      info,
		launchDep: p.api.launchEx.sym != 0 && cc >= 90,
		setCurrent: func() error {
			return p.api.status(p.ctxSetCurrent.name, p.ctxSetCurrent.raw(ctx))
		},
		release: func() error {
			return p.api.status(p.ctxRelease.name, p.ctxRelease.fn(dev))
		},
	}, nil
}
