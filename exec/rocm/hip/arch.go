package hip

import (
	"slices"
	"strings"
)

// comgr24 lists the 33 processors that comgr 2.4 (ROCm 5.2, the Debian 12
// package that hiprtc uses) reports through amd_comgr_get_isa_name, each with
// the target-ID features it accepts (LLVM AMDGPUUsage, "Processors" table).
// hiprtc aborts the whole process, instead of failing, when asked for an ISA
// comgr does not know (gfx940, gfx942, gfx1100, ... in hip-toolchain.md), so
// AMD Compile refuses anything outside this list before calling it.
var comgr24 = map[string][]string{
	"gfx600": nil, "gfx601": nil, "gfx602": nil,
	"gfx700": nil, "gfx701": nil, "gfx702": nil, "gfx703": nil, "gfx704": nil, "gfx705": nil,
	"gfx801": {"xnack"}, "gfx802": nil, "gfx803": nil, "gfx805": nil, "gfx810": {"xnack"},
	"gfx900": {"xnack"}, "gfx902": {"xnack"}, "gfx904": {"xnack"},
	"gfx906": {"sramecc", "xnack"}, "gfx908": {"sramecc", "xnack"}, "gfx909": {"xnack"},
	"gfx90a": {"sramecc", "xnack"}, "gfx90c": {"xnack"},
	"gfx1010": {"xnack"}, "gfx1011": {"xnack"}, "gfx1012": {"xnack"}, "gfx1013": {"xnack"},
	"gfx1030": nil, "gfx1031": nil, "gfx1032": nil, "gfx1033": nil, "gfx1034": nil, "gfx1035": nil, "gfx1036": nil,
}

// KnownAMDArch reports whether arch is a target ID that comgr 2.4 knows: one
// of gfx600..gfx1036 (the 33 processors of hip-toolchain.md), optionally
// followed by target-ID features the processor supports, each once, such as
// "gfx90a:xnack-" or "gfx90a:sramecc+:xnack-". Newer ISAs (gfx940, gfx942,
// gfx950, gfx11xx, gfx12xx) are not known.
func KnownAMDArch(arch string) bool {
	proc, rest, _ := strings.Cut(arch, ":")
	supported, ok := comgr24[proc]
	if !ok {
		return false
	}
	if rest == "" {
		return !strings.HasSuffix(arch, ":")
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(rest, ":") {
		name, ok := strings.CutSuffix(f, "+")
		if !ok {
			name, ok = strings.CutSuffix(f, "-")
		}
		if !ok || seen[name] || !slices.Contains(supported, name) {
			return false
		}
		seen[name] = true
	}
	return true
}
