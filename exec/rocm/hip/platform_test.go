package hip

import (
	"strings"
	"testing"
)

func TestLoadPlatform(t *testing.T) {
	if _, err := LoadPlatform("opencl"); err == nil {
		t.Error(`LoadPlatform("opencl") succeeded`)
	}
	for _, name := range []string{AMD, NVIDIA} {
		p, err := LoadPlatform(name)
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		if again, _ := LoadPlatform(name); again != p {
			t.Errorf("%s: LoadPlatform returned a new platform on the second call", name)
		}
		if p.Name() != name {
			t.Errorf("Name() = %q, want %q", p.Name(), name)
		}
		n, err := p.DeviceCount()
		if err != nil {
			t.Errorf("%s: DeviceCount: %v", name, err)
			continue
		}
		t.Logf("%s: %d devices", name, n)
		if _, err := p.DeviceInfo(n); err == nil {
			t.Errorf("%s: DeviceInfo(%d) of %d devices succeeded", name, n, n)
		}
		if _, err := p.OpenDevice(-1); err == nil {
			t.Errorf("%s: OpenDevice(-1) succeeded", name)
		}
	}
}

func TestLoadExplainsFailure(t *testing.T) {
	p, err := Load()
	if err == nil {
		t.Skipf("Load found a device (%s); nothing to explain", p.Name())
	}
	t.Log(err)
	for _, want := range []string{"amd: ", "nvidia: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Load error does not report the %q attempt: %v", want, err)
		}
	}
}
