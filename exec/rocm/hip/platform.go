package hip

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Platform names.
const (
	AMD    = "amd"
	NVIDIA = "nvidia"
)

// DeviceInfo describes one GPU.
type DeviceInfo struct {
	Index           int    // ordinal within its platform
	Name            string // marketing name, e.g. "NVIDIA H100 80GB HBM3"
	Arch            string // compile target: "sm_90" (NVIDIA), gcnArchName such as "gfx90a:sramecc+:xnack-" (AMD)
	WaveSize        int    // threads per warp/wavefront: 32 or 64
	TotalMem        uint64 // bytes of device memory
	MultiProcessors int    // SMs (NVIDIA) or CUs (AMD)
	Platform        string // AMD or NVIDIA
}

// DevPtr is a device memory address.
type DevPtr uintptr

// Platform is one GPU vendor library, loaded into the process. Platforms are
// never unloaded; LoadPlatform returns the same value on every call.
type Platform interface {
	Name() string // AMD or NVIDIA
	// DeviceCount is the number of GPUs; 0 (and no error) when the library
	// reports that there is no device.
	DeviceCount() (int, error)
	DeviceInfo(i int) (DeviceInfo, error)
	OpenDevice(i int) (*Device, error)
	// Compiler is the platform's runtime compiler; it works without a device.
	Compiler() (Compiler, error)
}

// platform is what both implementations provide: a Platform and the path of
// the library it loaded, for Load's explanations.
type platform interface {
	Platform
	library() string
}

// loadOrder is the order in which Load tries the platforms.
var loadOrder = []string{AMD, NVIDIA}

var platforms struct {
	sync.Mutex
	loaded map[string]platform
}

// Load returns the first platform whose library loads and has at least one
// device, trying AMD, then NVIDIA. Its error explains every attempt.
func Load() (Platform, error) {
	var why []string
	for _, name := range loadOrder {
		p, err := loadPlatform(name)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		switch n, err := p.DeviceCount(); {
		case err != nil:
			why = append(why, fmt.Sprintf("%s: %s loaded, counting devices failed: %v", name, p.library(), err))
		case n == 0:
			why = append(why, fmt.Sprintf("%s: %s loaded, no device", name, p.library()))
		default:
			return p, nil
		}
	}
	return nil, errors.New("hip: no usable GPU platform: " + strings.Join(why, "; "))
}

// LoadPlatform loads the named platform's driver library (AMD or NVIDIA). It
// succeeds without a device, for compile-only use and to report
// DeviceCount() == 0.
func LoadPlatform(name string) (Platform, error) {
	p, err := loadPlatform(name)
	if err != nil {
		return nil, fmt.Errorf("hip: %s: %w", name, err)
	}
	return p, nil
}

func loadPlatform(name string) (platform, error) {
	platforms.Lock()
	defer platforms.Unlock()
	if p, ok := platforms.loaded[name]; ok {
		return p, nil
	}
	var (
		p   platform
		err error
	)
	switch name {
	case AMD:
		p, err = loadAMD()
	case NVIDIA:
		p, err = loadNVIDIA()
	default:
		return nil, fmt.Errorf("unknown platform %q (want %q or %q)", name, AMD, NVIDIA)
	}
	if err != nil {
		return nil, err
	}
	if platforms.loaded == nil {
		platforms.loaded = map[string]platform{}
	}
	platforms.loaded[name] = p
	return p, nil
}

// checkIndex validates a device ordinal against p's device count.
func checkIndex(p Platform, i int) error {
	n, err := p.DeviceCount()
	if err != nil {
		return err
	}
	if i < 0 || i >= n {
		return fmt.Errorf("hip: %s: device %d out of range (%d devices)", p.Name(), i, n)
	}
	return nil
}
