package kernels

import (
	"debug/elf"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec/rocm/hip"
)

func TestZZQuantOnly(t *testing.T) {
	c, err := hip.LoadCompiler(hip.AMD)
	if err != nil {
		t.Skip(err)
	}
	for _, a := range []string{"gfx90a"} {
		js := []compileJob{{name: "quant", code: QuantSource(codegen.Target{Platform: codegen.AMD, Arch: a}), entries: QuantEntries()}}
		res := compileJobs(c, js, a)
		checkCompiled(t, js[0], res[0], a, elf.EM_AMDGPU, true)
	}
}
