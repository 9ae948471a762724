package codegen

import (
	"fmt"
	"strings"
)

// Platforms, as spelled by package hip.
const (
	AMD    = "amd"
	NVIDIA = "nvidia"
)

// Target is the device a source is written for.
type Target struct {
	Platform string // AMD or NVIDIA
	Arch     string // "gfx90a", "gfx1030", "sm_90": recorded in the source's header comment
	// WaveSize is the wavefront (warp) width, 32 or 64; 0 takes the
	// platform's default: 32 on NVIDIA and on AMD gfx10+ (RDNA), 64 on
	// other AMD ISAs (GCN, CDNA). It becomes the LOOM_WAVE macro; the
	// elementwise kernels do not depend on it (their block is a multiple
	// of both widths).
	WaveSize int
}

// check validates t and fills in the default wave size.
func (t Target) check() (Target, error) {
	switch t.Platform {
	case AMD, NVIDIA:
	default:
		return t, fmt.Errorf("codegen: unknown platform %q (want %q or %q)", t.Platform, AMD, NVIDIA)
	}
	if t.WaveSize == 0 {
		t.WaveSize = 32
		if t.Platform == AMD && !strings.HasPrefix(t.Arch, "gfx1") {
			t.WaveSize = 64
		}
	}
	if t.WaveSize != 32 && t.WaveSize != 64 {
		return t, fmt.Errorf("codegen: wave size %d (want 32 or 64)", t.WaveSize)
	}
	return t, nil
}

func (t Target) String() string {
	return fmt.Sprintf("%s %s wave%d", t.Platform, t.Arch, t.WaveSize)
}
