package hip

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestArgs(t *testing.T) {
	var a Args
	a.Ptr(0x7f0012345678).U32(0xfffffffe).I32(-2).U64(1<<63 + 5).I64(-3).F32(1.5).F64(-2.25)
	if a.Len() != 7 {
		t.Fatalf("Len() = %d, want 7", a.Len())
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	params := unsafe.Slice((*unsafe.Pointer)(a.kernelParams(&pin)), a.Len())
	// Each pointer addresses the value in its natural size.
	if got := *(*DevPtr)(params[0]); got != 0x7f0012345678 {
		t.Errorf("Ptr = %#x", got)
	}
	if got := *(*uint32)(params[1]); got != 0xfffffffe {
		t.Errorf("U32 = %#x", got)
	}
	if got := *(*int32)(params[2]); got != -2 {
		t.Errorf("I32 = %d", got)
	}
	if got := *(*uint64)(params[3]); got != 1<<63+5 {
		t.Errorf("U64 = %d", got)
	}
	if got := *(*int64)(params[4]); got != -3 {
		t.Errorf("I64 = %d", got)
	}
	if got := *(*float32)(params[5]); got != 1.5 {
		t.Errorf("F32 = %v", got)
	}
	if got := *(*float64)(params[6]); got != -2.25 {
		t.Errorf("F64 = %v", got)
	}
	for i, p := range params {
		if uintptr(p)%8 != 0 {
			t.Errorf("param %d at %p is not 8-byte aligned", i, p)
		}
	}
	if p := (*Args)(nil).kernelParams(&pin); p != nil {
		t.Errorf("nil Args: kernelParams = %p, want nil", p)
	}
	if p := new(Args).kernelParams(&pin); p != nil {
		t.Errorf("empty Args: kernelParams = %p, want nil", p)
	}
}
