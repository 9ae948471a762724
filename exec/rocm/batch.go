package rocm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/plan"
)

// Batched compiles. A runtime compile has a large fixed cost (NVRTC 13 on
// an H100: ~8 ms for an empty kernel, ~13 ms for one fused kernel) and
// NVRTC runs compiles of one process one at a time even from parallel
// threads (16 compiles took 0.50 s from one thread and 0.40–0.44 s from 4,
// 8 or 16). So Prepare puts every generated kernel of a plan that is in
// neither cache into one translation unit — one prelude, every body — and
// compiles that once. The batch's code object is then entered in the code
// cache under each member's own key (memory: the same object; disk: a small
// alias entry naming the batch's entry), so a later plan holding any of the
// kernels finds it, alone or with others, and an executor loads the
// batch's module once for all of them. If the batch fails to compile, the
// members are compiled one by one as before, which names the culprit.

// aliasMagic starts the code of a disk entry that points at a batch entry:
// the rest of the code is the batch's key.
const aliasMagic = "LOOMALIAS1\x00"

// maxBatch bounds the kernels in one translation unit, so that one huge
// plan still spreads over a few compiles (which overlap on compilers that
// run them in parallel).
const maxBatch = 64

// batchMember is one kernel of a batch.
type batchMember struct {
	name, code, body string
}

// warmBatch compiles, in batches, the generated kernels of p's pending
// steps whose code objects are in neither cache, and enters them into the
// code cache. It reports nothing: a failed batch leaves the members to the
// one-by-one compiles, whose errors are precise.
func (e *Executor) warmBatch(ctx context.Context, p *plan.Plan) {
	dir := CacheDir()
	opts := strings.Join(e.opts, " ")
	var gen []*plan.Kernel
	for _, s := range p.Steps {
		k := s.Kernel
		if isIndexKernel(k) || k.IsMatmul() || k.IsFusedMatmul() || k.IsFusedConv() || k.IsFusedQuant() || k.IsWindow() || k.IsCollective() || e.prepared(k) || k.Out.Numel() == 0 {
			continue
		}
		gen = append(gen, k)
	}
	// Render every source first, in parallel: a row kernel takes up to a
	// few hundred µs to generate, which was most of a warm (disk-cache)
	// preparation of a many-kernel plan (Supports, the batch and the
	// one-by-one path then share each rendering).
	var g errgroup.Group
	g.SetLimit(compileWorkers)
	for _, k := range gen {
		g.Go(func() error { e.source(k); return nil })
	}
	g.Wait()
	seen := map[string]bool{}
	var todo []batchMember
	for _, k := range gen {
		if e.Supports(k) != nil {
			continue
		}
		src, err := e.source(k)
		if err != nil || seen[src.Code] {
			continue
		}
		seen[src.Code] = true
		mk := memKey{src.Code, e.info.Arch, e.comp.Version(), opts}
		if e.codes.has(mk) || e.codes.onDisk(dir, cacheKey(src.Code, e.info.Arch, e.comp.Version(), e.opts)) {
			continue
		}
		todo = append(todo, batchMember{name: src.Name, code: src.Code, body: src.Body})
	}
	if len(todo) < 2 {
		return // one kernel: the ordinary path compiles it
	}
	for lo := 0; lo < len(todo); lo += maxBatch {
		if ctx.Err() != nil {
			return
		}
		batch := todo[lo:min(lo+maxBatch, len(todo))]
		if len(batch) < 2 {
			return
		}
		e.codes.compileBatch(e.comp, dir, e.target, e.info.Arch, e.opts, batch)
	}
}

// has reports whether mk is in memory.
func (c *codeCache) has(mk memKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mem[mk] != nil
}

// onDisk reports whether an entry for key exists (unchecked: a corrupt one
// is found and recompiled by get).
func (c *codeCache) onDisk(dir, key string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Stat(entryPath(dir, key))
	return err == nil
}

// compileBatch compiles the members in one unit and enters the result
// under every member's key. It returns false when the unit did not compile.
func (c *codeCache) compileBatch(comp hip.Compiler, dir string, t codegen.Target, arch string, opts []string, members []batchMember) bool {
	bodies := make([]string, len(members))
	names := make([]string, len(members))
	for i, m := range members {
		bodies[i], names[i] = m.body, m.name
	}
	unit := codegen.Unit(t, bodies...)
	key := cacheKey(unit, arch, comp.Version(), opts)
	t0 := time.Now()
	code, log, err := comp.Compile(unit, fmt.Sprintf("batch_%d_kernels", len(members)), arch, opts)
	if err != nil {
		return false
	}
	obj := &codeObject{key: key, code: code, log: log}
	c.writeDisk(dir, key, code)
	c.compiles.Add(1)
	c.batched.Add(int64(len(members)))
	c.compileNs.Add(int64(time.Since(t0)))
	ov := strings.Join(opts, " ")
	c.mu.Lock()
	for _, m := range members {
		c.mem[memKey{m.code, arch, comp.Version(), ov}] = obj
	}
	c.mu.Unlock()
	for _, m := range members {
		c.writeDisk(dir, cacheKey(m.code, arch, comp.Version(), opts), []byte(aliasMagic+key))
	}
	return true
}

// resolveAlias follows an alias entry to its batch entry (one level).
func (c *codeCache) resolveAlias(dir string, obj *codeObject) *codeObject {
	if obj == nil || !strings.HasPrefix(string(obj.code), aliasMagic) {
		return obj
	}
	target := string(obj.code[len(aliasMagic):])
	c.mu.Lock()
	hit := c.byKey[target]
	c.mu.Unlock()
	if hit != nil {
		return hit
	}
	data, err := os.ReadFile(entryPath(dir, target))
	if err != nil {
		return nil
	}
	code, ok := decodeEntry(data, target)
	if !ok || strings.HasPrefix(string(code), aliasMagic) {
		c.corrupt.Add(1)
		return nil
	}
	batch := &codeObject{key: target, code: code}
	c.mu.Lock()
	c.byKey[target] = batch
	c.mu.Unlock()
	return batch
}

// sourceKey keys a kernel's generated source in plan.Kernel.Cache: Supports,
// the batch and the one-by-one path all need it, and rendering a row kernel
// is not free (a few hundred µs for the larger ones).
type sourceKey struct{}

type sourceResult struct {
	src *codegen.Source
	err error
}

// source returns k's generated source for e's target, rendered once per
// plan kernel.
func (e *Executor) source(k *plan.Kernel) (*codegen.Source, error) {
	if v, ok := k.Cache.Load(plan.KeyOf(e, sourceKey{})); ok {
		r := v.(sourceResult)
		return r.src, r.err
	}
	src, err := codegen.Kernel(k, e.target)
	k.Cache.Store(plan.KeyOf(e, sourceKey{}), sourceResult{src, err})
	return src, err
}
