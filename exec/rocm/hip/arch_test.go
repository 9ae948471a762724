package hip

import "testing"

func TestKnownAMDArch(t *testing.T) {
	for arch, want := range map[string]bool{
		"gfx600": true, "gfx705": true, "gfx803": true, "gfx906": true, "gfx908": true,
		"gfx90a": true, "gfx90c": true, "gfx1010": true, "gfx1030": true, "gfx1036": true,
		"gfx90a:xnack-":          true,
		"gfx90a:sramecc+:xnack-": true,
		"gfx90a:xnack+:sramecc-": true,
		"gfx1012:xnack+":         true,
		// ISAs comgr 2.4 does not know (hiprtc aborts on them).
		"gfx940": false, "gfx941": false, "gfx942": false, "gfx950": false,
		"gfx1100": false, "gfx1103": false, "gfx1150": false, "gfx1200": false,
		"gfx604": false, "gfx1037": false,
		// Malformed target IDs and unsupported features.
		"": false, "gfx": false, "GFX90A": false, "sm_90": false,
		"gfx90a:": false, "gfx90a:xnack": false, "gfx90a:xnack-:xnack+": false,
		"gfx1030:xnack-": false, "gfx803:sramecc+": false, "gfx90a:tgsplit+": false,
	} {
		if got := KnownAMDArch(arch); got != want {
			t.Errorf("KnownAMDArch(%q) = %v, want %v", arch, got, want)
		}
	}
	if len(comgr24) != 33 {
		t.Errorf("comgr24 lists %d ISAs, want the 33 of comgr 2.4", len(comgr24))
	}
}
