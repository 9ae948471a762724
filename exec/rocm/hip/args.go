package hip

import (
	"math"
	"runtime"
	"unsafe"
)

// Args builds the kernelParams array of a launch: one pointer per kernel
// parameter, in order, each pointing at that parameter's value.
//
// Every value lives in its own 8-byte slot, stored little-endian in its
// natural size (4 bytes for U32/I32/F32, 8 for the rest) at the start of the
// slot; the launch reads exactly the parameter's size from each pointer, so
// slots satisfy every scalar's alignment. The methods return a so that calls
// chain: new(Args).Ptr(x).U32(n).
type Args struct {
	slots []uint64
}

// Ptr appends a device pointer.
func (a *Args) Ptr(p DevPtr) *Args { return a.add(uint64(p)) }

// U32 appends a 32-bit unsigned integer.
func (a *Args) U32(v uint32) *Args { return a.add(uint64(v)) }

// I32 appends a 32-bit signed integer.
func (a *Args) I32(v int32) *Args { return a.add(uint64(uint32(v))) }

// U64 appends a 64-bit unsigned integer.
func (a *Args) U64(v uint64) *Args { return a.add(v) }

// I64 appends a 64-bit signed integer.
func (a *Args) I64(v int64) *Args { return a.add(uint64(v)) }

// F32 appends a float.
func (a *Args) F32(v float32) *Args { return a.add(uint64(math.Float32bits(v))) }

// F64 appends a double.
func (a *Args) F64(v float64) *Args { return a.add(math.Float64bits(v)) }

// Len is the number of arguments.
func (a *Args) Len() int { return len(a.slots) }

func (a *Args) add(v uint64) *Args {
	a.slots = append(a.slots, v)
	return a
}

// kernelParams returns the void** array for a launch (nil when there are no
// arguments). The array and the slots it points into are Go memory seen by C,
// and the array holds Go pointers, so both are pinned on pin until the caller
// unpins it after the launch.
func (a *Args) kernelParams(pin *runtime.Pinner) unsafe.Pointer {
	if a == nil || len(a.slots) == 0 {
		return nil
	}
	pin.Pin(&a.slots[0])
	params := make([]unsafe.Pointer, len(a.slots))
	for i := range a.slots {
		params[i] = unsafe.Pointer(&a.slots[i])
	}
	pin.Pin(&params[0])
	return unsafe.Pointer(&params[0])
}
