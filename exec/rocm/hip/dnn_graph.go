package hip

import (
	"fmt"
	"slices"
	"unsafe"
)

// cuDNN's graph API (the backend descriptors of cudnn_graph.h), for the
// forward conv only (ConvDesc.Graph). The legacy API's algorithms are a
// fixed menu; the graph API's engines are the kernels PyTorch's convs run
// through (cuDNN's frontend is a C++ wrapper over these same calls). For
// W12 in bf16 channels-last on an H200 the legacy API's best, algorithm 1,
// took 0.20–0.24 ms where PyTorch's engine (an sm90 implicit-GEMM kernel)
// took 0.157.
//
// A plan is one operation graph — the conv, tensors x (uid 1), w (2) and
// y (3) with their strides; with ConvDesc.Bias and ReLU also a pointwise
// add of b (uid 4, one value a channel) and a pointwise ReLU over virtual
// f32 intermediates, which the engines fuse into the conv's epilogue —
// and the execution plan of the GraphRank-th
// engine configuration the heuristics (mode A, then the fallback list)
// rank that finalizes, fits the workspace bound and keeps Loom's accuracy
// promise (graphAccurate). The executor times the first few against the
// legacy plan (exec/rocm/conv.go) and keeps whichever runs fastest. A run makes a
// variant pack (the three pointers and the workspace) and executes.

// Backend enums (cudnn_graph.h of cuDNN 9).
const (
	// descriptor types
	cudnnDescPointwise   = 0
	cudnnDescConvolution = 1
	cudnnDescEngine      = 2
	cudnnDescEngineCfg   = 3
	cudnnDescEngineHeur  = 4
	cudnnDescExecPlan    = 5
	cudnnDescOpConvFwd   = 10
	cudnnDescOpPointwise = 13
	cudnnDescOpGraph     = 15
	cudnnDescVariantPack = 16
	cudnnDescTensor      = 17
	// attribute types
	cudnnTypeHandle     = 0
	cudnnTypeDataType   = 1
	cudnnTypeBoolean    = 2
	cudnnTypeInt64      = 3
	cudnnTypeFloat      = 4
	cudnnTypeDouble     = 5
	cudnnTypeVoidPtr    = 6
	cudnnTypeConvMode   = 7
	cudnnTypeHeurMode   = 8
	cudnnTypeNanProp    = 10
	cudnnTypeNumNote    = 11
	cudnnTypePwMode     = 14
	cudnnTypeDescriptor = 15
	// attributes
	cudnnAttrPwMode           = 0
	cudnnAttrPwMathPrec       = 1
	cudnnAttrPwNanProp        = 2
	cudnnAttrConvCompType     = 100
	cudnnAttrConvMode         = 101
	cudnnAttrConvDilations    = 102
	cudnnAttrConvStrides      = 103
	cudnnAttrConvPostPad      = 104
	cudnnAttrConvPrePad       = 105
	cudnnAttrConvSpatialDims  = 106
	cudnnAttrHeurMode         = 200
	cudnnAttrHeurGraph        = 201
	cudnnAttrHeurResults      = 202
	cudnnAttrCfgEngine        = 300
	cudnnAttrPlanHandle       = 400
	cudnnAttrPlanConfig       = 401
	cudnnAttrPlanWorkspace    = 402
	cudnnAttrFwdAlpha         = 700
	cudnnAttrFwdBeta          = 701
	cudnnAttrFwdConv          = 702
	cudnnAttrFwdW             = 703
	cudnnAttrFwdX             = 704
	cudnnAttrFwdY             = 705
	cudnnAttrPwOpDesc         = 750
	cudnnAttrPwOpX            = 751
	cudnnAttrPwOpB            = 752
	cudnnAttrPwOpY            = 753
	cudnnAttrGraphHandle      = 800
	cudnnAttrGraphOps         = 801
	cudnnAttrTensorAlign      = 900
	cudnnAttrTensorType       = 901
	cudnnAttrTensorDims       = 902
	cudnnAttrTensorStrides    = 903
	cudnnAttrTensorUID        = 906
	cudnnAttrTensorVirtual    = 907
	cudnnAttrPackUIDs         = 1000
	cudnnAttrPackPointers     = 1001
	cudnnAttrPackWorkspace    = 1003
	cudnnAttrEngineIndex      = 1301
	cudnnAttrEngineNotes      = 1303
	cudnnHeurModeFallback     = 2
	cudnnHeurModeA            = 3
	cudnnNoteTensorCore       = 0
	cudnnNoteDownConvert      = 1
	cudnnNoteReducedReduction = 2
	cudnnNoteFFT              = 3
	cudnnNoteNondeterministic = 4
	cudnnNoteWinograd         = 5
	cudnnNoteWinograd13       = 8
	cudnnPwAdd                = 0
	cudnnPwReLU               = 100
	cudnnPropagateNaN         = 1
)

// cudnnGraphAPI is the backend API's six calls (in libcudnn.so.9 beside
// the legacy ones; a library without them leaves ConvDesc.Graph refused).
type cudnnGraphAPI struct {
	create   cfunc[func(typ int32, d *uintptr) int32]
	destroy  cfunc[func(d uintptr) int32]
	finalize cfunc[func(d uintptr) int32]
	set      cfunc[func(d uintptr, name, typ int32, n int64, p unsafe.Pointer) int32]
	get      cfunc[func(d uintptr, name, typ int32, req int64, n *int64, p unsafe.Pointer) int32]
	execute  cfunc[func(h, plan, pack uintptr) int32]
}

// gattr is one attribute value for cudnnBackendSetAttribute: n elements
// of type typ at v.
type gattr struct {
	name, typ int32
	n         int64
	v         unsafe.Pointer
}

// setAll sets attrs on descriptor d in order, stopping at the first the
// library refuses (status is the library's status check).
func (g *cudnnGraphAPI) setAll(status statusFunc, d uintptr, attrs ...gattr) error {
	for _, a := range attrs {
		if err := status(g.set.name, g.set.fn(d, a.name, a.typ, a.n, a.v)); err != nil {
			return fmt.Errorf("attribute %d: %w", a.name, err)
		}
	}
	return nil
}

func bindCudnnGraph(b *binder) *cudnnGraphAPI {
	g := &cudnnGraphAPI{}
	bind(b, &g.create, "cudnnBackendCreateDescriptor")
	bind(b, &g.destroy, "cudnnBackendDestroyDescriptor")
	bind(b, &g.finalize, "cudnnBackendFinalize")
	bind(b, &g.set, "cudnnBackendSetAttribute")
	bind(b, &g.get, "cudnnBackendGetAttribute")
	bind(b, &g.execute, "cudnnBackendExecute")
	return g
}

// graphAccurate reports whether an engine with numerical notes notes keeps
// Loom's accuracy promise for cd (the legacy path's accurate, in the
// graph API's terms): no FFT or Winograd transform and no reduced-
// precision reduction for f16 and bf16; no tensor-core down-conversion
// (TF32) for f32 unless cd.TF32; and, for every type, a deterministic
// result (no split reductions by atomics), so that a conv gives the same
// bits run after run.
func graphAccurate(cd ConvDesc, notes []int32) bool {
	for _, n := range notes {
		switch {
		case n == cudnnNoteNondeterministic:
			return false
		case (cd.Type == GemmF16 || cd.Type == GemmBF16) &&
			(n == cudnnNoteReducedReduction || n == cudnnNoteFFT || (n >= cudnnNoteWinograd && n <= cudnnNoteWinograd13)):
			return false
		case (cd.Type == GemmF32 && !cd.TF32 || cd.Type == GemmF64) && (n == cudnnNoteTensorCore || n == cudnnNoteDownConvert):
			return false
		}
	}
	return true
}

// graphStrides returns the strides of a 4-D tensor of logical dims
// [n, c, h, w] laid out NCHW or (nhwc) channels-last.
func graphStrides(d [4]int64, nhwc bool) [4]int64 {
	if nhwc {
		return [4]int64{d[2] * d[3] * d[1], 1, d[3] * d[1], d[1]}
	}
	return [4]int64{d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}
}

// cudnnGraphPlan is a forward conv planned through the graph API.
type cudnnGraphPlan struct {
	c      *cudnn
	cd     ConvDesc
	plan   uintptr
	ws     uint64
	engine int64
	descs  []uintptr // every descriptor the plan made, destroyed by Close
}

// planGraph builds cd's graph-API plan; c.mu is held and the device is
// current (inside c.d.do).
func (c *cudnn) planGraph(cd ConvDesc) (*cudnnGraphPlan, error) {
	g := c.api.graph
	if g == nil {
		return nil, fmt.Errorf("the library lacks the graph API (%v)", c.api.graphErr)
	}
	if cd.Transposed {
		return nil, fmt.Errorf("the graph API plans forward convs only")
	}
	p := &cudnnGraphPlan{c: c, cd: cd}
	ok := false
	defer func() {
		if !ok {
			p.destroy()
		}
	}()
	st := func(f string, rc int32) error { return c.api.status(f, rc) }
	newDesc := func(typ int32) (uintptr, error) {
		var d uintptr
		if err := st(g.create.name, g.create.fn(typ, &d)); err != nil {
			return 0, err
		}
		p.descs = append(p.descs, d)
		return d, nil
	}
	// build makes a descriptor of type typ with attrs and finalizes it;
	// what names it in the error.
	build := func(typ int32, what string, attrs ...gattr) (uintptr, error) {
		d, err := newDesc(typ)
		if err == nil {
			err = g.setAll(c.api.status, d, attrs...)
		}
		if err == nil {
			err = st(g.finalize.name, g.finalize.fn(d))
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		return d, nil
	}
	data, compute := cudnnTypes(cd.Type)
	i64 := func(v int) int64 { return int64(v) }
	// tensor describes a tensor of the data type, or a virtual one (an
	// intermediate of the graph, never in memory) of the compute type.
	tensor := func(what string, uid int64, dims [4]int64, virtual bool) (uintptr, error) {
		strides := graphStrides(dims, cd.NHWC)
		align, typ, virt := int64(16), data, byte(0)
		if virtual {
			typ, virt = compute, 1
		}
		return build(cudnnDescTensor, what,
			gattr{cudnnAttrTensorType, cudnnTypeDataType, 1, unsafe.Pointer(&typ)},
			gattr{cudnnAttrTensorDims, cudnnTypeInt64, 4, unsafe.Pointer(&dims[0])},
			gattr{cudnnAttrTensorStrides, cudnnTypeInt64, 4, unsafe.Pointer(&strides[0])},
			gattr{cudnnAttrTensorUID, cudnnTypeInt64, 1, unsafe.Pointer(&uid)},
			gattr{cudnnAttrTensorAlign, cudnnTypeInt64, 1, unsafe.Pointer(&align)},
			gattr{cudnnAttrTensorVirtual, cudnnTypeBoolean, 1, unsafe.Pointer(&virt)})
	}
	x, err := tensor("x", 1, [4]int64{i64(cd.N), i64(cd.C), i64(cd.H), i64(cd.W)}, false)
	if err != nil {
		return nil, err
	}
	w, err := tensor("w", 2, [4]int64{i64(cd.K), i64(cd.C / cd.Groups), i64(cd.R), i64(cd.S)}, false)
	if err != nil {
		return nil, err
	}
	ydims := [4]int64{i64(cd.N), i64(cd.K), i64(cd.OutH), i64(cd.OutW)}
	y, err := tensor("y", 3, ydims, false)
	if err != nil {
		return nil, err
	}
	// With an epilogue the conv writes a virtual tensor (uid 10) that the
	// bias add (b: uid 4) and the ReLU read, the last writing y.
	cy := y
	if cd.Bias || cd.ReLU {
		if cy, err = tensor("conv output", 10, ydims, true); err != nil {
			return nil, err
		}
	}
	mode, dims := int32(cudnnCrossCorrelation), int64(2)
	dil := [2]int64{i64(cd.DilH), i64(cd.DilW)}
	str := [2]int64{i64(cd.StrideH), i64(cd.StrideW)}
	pad := [2]int64{i64(cd.PadH), i64(cd.PadW)}
	conv, err := build(cudnnDescConvolution, "conv",
		gattr{cudnnAttrConvCompType, cudnnTypeDataType, 1, unsafe.Pointer(&compute)},
		gattr{cudnnAttrConvMode, cudnnTypeConvMode, 1, unsafe.Pointer(&mode)},
		gattr{cudnnAttrConvSpatialDims, cudnnTypeInt64, 1, unsafe.Pointer(&dims)},
		gattr{cudnnAttrConvDilations, cudnnTypeInt64, 2, unsafe.Pointer(&dil[0])},
		gattr{cudnnAttrConvStrides, cudnnTypeInt64, 2, unsafe.Pointer(&str[0])},
		gattr{cudnnAttrConvPrePad, cudnnTypeInt64, 2, unsafe.Pointer(&pad[0])},
		gattr{cudnnAttrConvPostPad, cudnnTypeInt64, 2, unsafe.Pointer(&pad[0])})
	if err != nil {
		return nil, err
	}
	a32, b32 := float32(1), float32(0)
	a64, b64 := float64(1), float64(0)
	alpha, beta, at := unsafe.Pointer(&a32), unsafe.Pointer(&b32), int32(cudnnTypeFloat)
	if cd.Type == GemmF64 {
		alpha, beta, at = unsafe.Pointer(&a64), unsafe.Pointer(&b64), cudnnTypeDouble
	}
	op, err := build(cudnnDescOpConvFwd, "operation",
		gattr{cudnnAttrFwdX, cudnnTypeDescriptor, 1, unsafe.Pointer(&x)},
		gattr{cudnnAttrFwdW, cudnnTypeDescriptor, 1, unsafe.Pointer(&w)},
		gattr{cudnnAttrFwdY, cudnnTypeDescriptor, 1, unsafe.Pointer(&cy)},
		gattr{cudnnAttrFwdConv, cudnnTypeDescriptor, 1, unsafe.Pointer(&conv)},
		gattr{cudnnAttrFwdAlpha, at, 1, alpha},
		gattr{cudnnAttrFwdBeta, at, 1, beta})
	if err != nil {
		return nil, err
	}
	ops := []uintptr{op}
	// pointwise adds the op mode(in[, b]) → out, computed in the compute
	// type.
	// A ReLU passes NaN on, as Loom's does (cuDNN's default maps it to 0).
	nanProp := int32(cudnnPropagateNaN)
	pointwise := func(what string, mode int32, in, b, out uintptr) error {
		attrs := []gattr{
			{cudnnAttrPwMode, cudnnTypePwMode, 1, unsafe.Pointer(&mode)},
			{cudnnAttrPwMathPrec, cudnnTypeDataType, 1, unsafe.Pointer(&compute)},
		}
		if mode == cudnnPwReLU {
			attrs = append(attrs, gattr{cudnnAttrPwNanProp, cudnnTypeNanProp, 1, unsafe.Pointer(&nanProp)})
		}
		pw, err := build(cudnnDescPointwise, what, attrs...)
		if err != nil {
			return err
		}
		attrs = []gattr{
			{cudnnAttrPwOpDesc, cudnnTypeDescriptor, 1, unsafe.Pointer(&pw)},
			{cudnnAttrPwOpX, cudnnTypeDescriptor, 1, unsafe.Pointer(&in)},
			{cudnnAttrPwOpY, cudnnTypeDescriptor, 1, unsafe.Pointer(&out)},
		}
		if b != 0 {
			attrs = append(attrs, gattr{cudnnAttrPwOpB, cudnnTypeDescriptor, 1, unsafe.Pointer(&b)})
		}
		o, err := build(cudnnDescOpPointwise, what, attrs...)
		ops = append(ops, o)
		return err
	}
	if cd.Bias {
		b, err := tensor("b", 4, [4]int64{1, i64(cd.K), 1, 1}, false)
		if err != nil {
			return nil, err
		}
		out := y
		if cd.ReLU {
			if out, err = tensor("biased", 11, ydims, true); err != nil {
				return nil, err
			}
		}
		if err := pointwise("bias add", cudnnPwAdd, cy, b, out); err != nil {
			return nil, err
		}
		cy = out
	}
	if cd.ReLU {
		if err := pointwise("relu", cudnnPwReLU, cy, 0, y); err != nil {
			return nil, err
		}
	}
	h := c.h
	graph, err := build(cudnnDescOpGraph, "operation graph",
		gattr{cudnnAttrGraphOps, cudnnTypeDescriptor, int64(len(ops)), unsafe.Pointer(&ops[0])},
		gattr{cudnnAttrGraphHandle, cudnnTypeHandle, 1, unsafe.Pointer(&h)})
	if err != nil {
		return nil, err
	}
	var tried []string
	skip := cd.GraphRank
	seen := map[int64]bool{} // engines already counted (the fallback list repeats some)
	for _, hm := range []int32{cudnnHeurModeA, cudnnHeurModeFallback} {
		heur, err := newDesc(cudnnDescEngineHeur)
		if err != nil {
			return nil, err
		}
		if err := g.setAll(c.api.status, heur,
			gattr{cudnnAttrHeurGraph, cudnnTypeDescriptor, 1, unsafe.Pointer(&graph)},
			gattr{cudnnAttrHeurMode, cudnnTypeHeurMode, 1, unsafe.Pointer(&hm)}); err != nil {
			return nil, err
		}
		if err := st(g.finalize.name, g.finalize.fn(heur)); err != nil {
			tried = append(tried, fmt.Sprintf("heuristics %d: %v", hm, err))
			continue
		}
		var n int64
		if err := st(g.get.name, g.get.fn(heur, cudnnAttrHeurResults, cudnnTypeDescriptor, 0, &n, nil)); err != nil || n == 0 {
			tried = append(tried, fmt.Sprintf("heuristics %d: %d configurations (%v)", hm, n, err))
			continue
		}
		cfgs := make([]uintptr, n)
		for i := range cfgs {
			if cfgs[i], err = newDesc(cudnnDescEngineCfg); err != nil {
				return nil, err
			}
		}
		if err := st(g.get.name, g.get.fn(heur, cudnnAttrHeurResults, cudnnTypeDescriptor, n, &n, unsafe.Pointer(&cfgs[0]))); err != nil {
			tried = append(tried, fmt.Sprintf("heuristics %d: %v", hm, err))
			continue
		}
		for _, cfg := range cfgs[:n] {
			eng, err := newDesc(cudnnDescEngine)
			if err != nil {
				return nil, err
			}
			var got int64
			if st(g.get.name, g.get.fn(cfg, cudnnAttrCfgEngine, cudnnTypeDescriptor, 1, &got, unsafe.Pointer(&eng))) != nil {
				continue
			}
			index := int64(-1)
			g.get.fn(eng, cudnnAttrEngineIndex, cudnnTypeInt64, 1, &got, unsafe.Pointer(&index))
			if index >= 0 && seen[index] {
				continue
			}
			seen[index] = true
			notes := make([]int32, 16)
			if st(g.get.name, g.get.fn(eng, cudnnAttrEngineNotes, cudnnTypeNumNote, int64(len(notes)), &got, unsafe.Pointer(&notes[0]))) != nil {
				continue
			}
			if !graphAccurate(cd, notes[:got]) {
				tried = append(tried, fmt.Sprintf("engine %d: numerical notes %v", index, notes[:got]))
				continue
			}
			plan, err := newDesc(cudnnDescExecPlan)
			if err != nil {
				return nil, err
			}
			if g.setAll(c.api.status, plan,
				gattr{cudnnAttrPlanHandle, cudnnTypeHandle, 1, unsafe.Pointer(&h)},
				gattr{cudnnAttrPlanConfig, cudnnTypeDescriptor, 1, unsafe.Pointer(&cfg)}) != nil {
				continue
			}
			if err := st(g.finalize.name, g.finalize.fn(plan)); err != nil {
				tried = append(tried, fmt.Sprintf("engine %d: %v", index, err))
				continue
			}
			var ws int64
			if st(g.get.name, g.get.fn(plan, cudnnAttrPlanWorkspace, cudnnTypeInt64, 1, &got, unsafe.Pointer(&ws))) != nil || ws < 0 {
				continue
			}
			if cd.MaxWorkspace > 0 && uint64(ws) > cd.MaxWorkspace {
				tried = append(tried, fmt.Sprintf("engine %d needs %d bytes", index, ws))
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			p.plan, p.ws, p.engine = plan, uint64(ws), index
			ok = true
			return p, nil
		}
	}
	return nil, &Error{Call: "cudnnBackendFinalize", Code: cudnnStatusNotSupported,
		Name: fmt.Sprintf("no engine of rank %d for this convolution within %d bytes of workspace (%v)", cd.GraphRank, cd.MaxWorkspace, tried)}
}

func (p *cudnnGraphPlan) Workspace() uint64 { return p.ws }

func (p *cudnnGraphPlan) Algo() string {
	s := fmt.Sprintf("cudnn graph engine %d", p.engine)
	if p.cd.Bias {
		s += " + bias"
	}
	if p.cd.ReLU {
		s += " + relu"
	}
	if p.cd.NHWC {
		s += ", channels-last"
	}
	return s
}

func (p *cudnnGraphPlan) Run(x, w, y, ws DevPtr) error {
	if p.cd.Bias {
		return fmt.Errorf("hip: the plan of a conv with a bias runs with RunBias")
	}
	return p.RunBias(x, w, 0, y, ws)
}

func (p *cudnnGraphPlan) RunBias(x, w, b, y, ws DevPtr) error {
	c := p.c
	g := c.api.graph
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return fmt.Errorf("hip: cuDNN handle closed")
	}
	return c.d.do(func(*runtimeAPI) error {
		st := func(f string, rc int32) error { return c.api.status(f, rc) }
		var pack uintptr
		if err := st(g.create.name, g.create.fn(cudnnDescVariantPack, &pack)); err != nil {
			return err
		}
		defer g.destroy.fn(pack)
		uids := [4]int64{1, 2, 3, 4}
		ptrs := [4]uintptr{uintptr(x), uintptr(w), uintptr(y), uintptr(b)}
		n := int64(3)
		if p.cd.Bias {
			n = 4
		}
		wsp := uintptr(ws)
		if err := g.setAll(c.api.status, pack,
			gattr{cudnnAttrPackUIDs, cudnnTypeInt64, n, unsafe.Pointer(&uids[0])},
			gattr{cudnnAttrPackPointers, cudnnTypeVoidPtr, n, unsafe.Pointer(&ptrs[0])},
			gattr{cudnnAttrPackWorkspace, cudnnTypeVoidPtr, 1, unsafe.Pointer(&wsp)}); err != nil {
			return err
		}
		if err := st(g.finalize.name, g.finalize.fn(pack)); err != nil {
			return err
		}
		return st(g.execute.name, g.execute.fn(c.h, p.plan, pack))
	})
}

func (p *cudnnGraphPlan) Close() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.c.d.do(func(*runtimeAPI) error {
		p.destroy()
		return nil
	})
}

// destroy destroys the plan's descriptors, the last made first.
func (p *cudnnGraphPlan) destroy() {
	for _, d := range slices.Backward(p.descs) {
		p.c.api.graph.destroy.fn(d)
	}
	p.descs, p.plan = nil, 0
}
