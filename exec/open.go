package exec

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Opener creates an executor; it returns an error saying why the device is
// unusable (no library, no device, …).
type Opener func() (Executor, error)

var (
	regMu   sync.Mutex
	openers = map[string]Opener{}
)

// Register makes an executor available to Open under name. Executor packages
// call it from init, like database/sql drivers: import exec/cpu and
// exec/rocm (for side effects or directly) to make "cpu" and "rocm" known.
func Register(name string, o Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	openers[name] = o
}

// Open returns an executor by name. "auto" tries every registered GPU
// executor first ("rocm") and falls back to "cpu"; the second result says
// which was chosen and why. Naming an executor explicitly fails if it cannot
// open, instead of falling back.
func Open(name string) (Executor, string, error) {
	regMu.Lock()
	o, ok := openers[name]
	gpu, gok := openers["rocm"]
	cpu, cok := openers["cpu"]
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	regMu.Unlock()
	sort.Strings(names)
	if name != "auto" {
		if !ok {
			return nil, "", fmt.Errorf("loom: executor %q is not registered (registered: %v; import its package)", name, names)
		}
		e, err := o()
		if err != nil {
			return nil, "", fmt.Errorf("loom: open %s: %w", name, err)
		}
		return e, name + " (asked for)", nil
	}
	var why error
	if gok {
		e, err := gpu()
		if err == nil {
			return e, "rocm: a GPU was found", nil
		}
		why = err
	} else {
		why = errors.New("the rocm executor is not linked in")
	}
	if !cok {
		return nil, "", fmt.Errorf("loom: open auto: no GPU (%v) and the cpu executor is not registered", why)
	}
	e, err := cpu()
	if err != nil {
		return nil, "", fmt.Errorf("loom: open auto: cpu: %w", err)
	}
	return e, "cpu: no GPU executor could open (" + why.Error() + ")", nil
}
