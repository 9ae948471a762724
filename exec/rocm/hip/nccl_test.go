package hip

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestCollectivesArgs: what is checked before the library is reached.
func TestCollectivesArgs(t *testing.T) {
	if _, err := LoadCollectives("tpu"); err == nil || !strings.Contains(err.Error(), `"tpu"`) {
		t.Errorf("unknown platform: %v", err)
	}
	for _, c := range []struct {
		t    CollType
		size int
	}{{CollI8, 1}, {CollU8, 1}, {CollF16, 2}, {CollBF16, 2}, {CollI32, 4}, {CollU32, 4}, {CollF32, 4}, {CollI64, 8}, {CollU64, 8}, {CollF64, 8}, {CollType(42), 0}} {
		if got := c.t.Size(); got != c.size {
			t.Errorf("CollType(%d).Size() = %d, want %d", c.t, got, c.size)
		}
	}
	if err := checkColl("AllReduce", 8, CollType(42)); err == nil || !strings.Contains(err.Error(), "unknown element type 42") {
		t.Errorf("unknown type: %v", err)
	}
	if err := checkColl("AllGather", -1, CollF32); err == nil {
		t.Error("a negative count passed")
	}
	if err := checkColl("AllGather", 1<<61, CollF32); err == nil {
		t.Error("a count whose bytes overflow passed")
	}
}

// TestCollectivesMissing: where the library is not installed (the CI
// machine has neither NCCL nor RCCL) loading it is an error that names
// the library and what the loader said, not a crash.
func TestCollectivesMissing(t *testing.T) {
	for _, p := range []string{NVIDIA, AMD} {
		c, err := LoadCollectives(p)
		if err == nil {
			t.Logf("%s: %s loads here", p, c.Name())
			continue
		}
		want := map[string]string{NVIDIA: "no NCCL", AMD: "no RCCL"}[p]
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", p, err, want)
		}
	}
}

// TestGPUCollectivesOneRank: a communicator of one rank on the first GPU,
// made both ways (UniqueID + InitRank, and InitAll), runs every collective
// in f32, bf16 and i32, in place and not, against the plain-Go result (for
// one rank each is the identity on its input); Wait sees them finish with
// no asynchronous error; bad ranks and roots are errors; a destroyed
// communicator refuses calls.
func TestGPUCollectivesOneRank(t *testing.T) {
	d := openGPU(t)
	defer d.Close()
	c, err := LoadCollectives(d.Info().Platform)
	if err != nil {
		t.Skipf("no collective library on this GPU machine: %v", err)
	}
	t.Logf("collectives: %s", c.Name())
	s, err := d.NewStream()
	must(t, "NewStream", err)
	defer d.DestroyStream(s)
	id, err := c.UniqueID()
	must(t, "UniqueID", err)
	if _, err := c.InitRank(d, id, 1, 1); err == nil {
		t.Error("rank 1 of 1 accepted")
	}
	byRank, err := c.InitRank(d, id, 1, 0)
	must(t, "InitRank", err)
	all, err := c.InitAll([]*Device{d})
	must(t, "InitAll", err)
	if len(all) != 1 || all[0].Rank() != 0 || all[0].Size() != 1 {
		t.Fatalf("InitAll: %d communicators, rank %d of %d", len(all), all[0].Rank(), all[0].Size())
	}
	if _, err := c.InitAll([]*Device{d, d}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("InitAll with a device twice: %v", err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	const n = 1000
	for _, cm := range []*Comm{byRank, all[0]} {
		for _, ty := range []CollType{CollF32, CollBF16, CollI32} {
			host := make([]byte, n*ty.Size())
			for i := range host {
				host[i] = byte(r.IntN(256))
			}
			if ty == CollF32 { // no NaNs: max must return the value itself
				for i := 0; i < n; i++ {
					v := float32(r.NormFloat64())
					*(*float32)(unsafe.Pointer(&host[4*i])) = v
				}
			}
			if ty == CollBF16 {
				for i := 0; i < n; i++ {
					b := math.Float32bits(float32(r.NormFloat64())) >> 16
					host[2*i], host[2*i+1] = byte(b), byte(b>>8)
				}
			}
			src, err := d.Malloc(uint64(len(host)))
			must(t, "Malloc", err)
			dst, err := d.Malloc(uint64(len(host)))
			must(t, "Malloc", err)
			must(t, "upload", d.MemcpyHtoD(src, unsafe.Pointer(&host[0]), uint64(len(host)), s))
			check := func(what string, p DevPtr) {
				t.Helper()
				must(t, what+": Wait", cm.Wait(s, time.Now().Add(30*time.Second)))
				got := make([]byte, len(host))
				must(t, "download", d.MemcpyDtoH(unsafe.Pointer(&got[0]), p, uint64(len(got)), s))
				if !slices.Equal(got, host) {
					t.Fatalf("%s %v: the result is not the input (one rank)", what, ty)
				}
				must(t, "clear", d.MemsetD8(dst, 0xA5, uint64(len(host)), s))
			}
			for _, op := range []RedOp{RedSum, RedMax, RedMin} {
				must(t, "AllReduce", cm.AllReduce(src, dst, n, ty, op, s))
				check("AllReduce", dst)
			}
			must(t, "AllGather", cm.AllGather(src, dst, n, ty, s))
			check("AllGather", dst)
			must(t, "ReduceScatter", cm.ReduceScatter(src, dst, n, ty, RedSum, s))
			check("ReduceScatter", dst)
			must(t, "Broadcast", cm.Broadcast(src, dst, n, ty, 0, s))
			check("Broadcast", dst)
			must(t, "AllReduce in place", cm.AllReduce(src, src, n, ty, RedSum, s))
			check("AllReduce in place", src)
			if err := cm.Broadcast(src, dst, n, ty, 1, s); err == nil {
				t.Error("Broadcast from root 1 of 1 accepted")
			}
			must(t, "Free", d.Free(src))
			must(t, "Free", d.Free(dst))
		}
		must(t, "AsyncError", cm.AsyncError())
		must(t, "Destroy", cm.Destroy())
		must(t, "Destroy again", cm.Destroy())
		if err := cm.AllReduce(0, 0, 1, CollF32, RedSum, s); err == nil || !strings.Contains(err.Error(), "destroyed") {
			t.Errorf("a call on a destroyed communicator: %v", err)
		}
	}
	// Group: the calls of several communicators of one process, launched
	// together (one here).
	g, err := c.InitAll([]*Device{d})
	must(t, "InitAll", err)
	buf, err := d.Malloc(64)
	must(t, "Malloc", err)
	must(t, "Group", c.Group(func() error { return g[0].AllReduce(buf, buf, 16, CollF32, RedSum, s) }))
	must(t, "Wait", g[0].Wait(s, time.Time{}))
	must(t, "Free", d.Free(buf))
	must(t, "Destroy", g[0].Destroy())
}
