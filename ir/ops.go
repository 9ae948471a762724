package ir

import (
	"fmt"
	"strings"

	"github.com/loomgraph/loom/dtype"
)

// Op identifies an operation; its row in the op table describes it.
type Op uint16

// The ops. Order matters only for readability; the table below is the truth.
const (
	OpInvalid Op = iota

	// Sources.
	OpInput  // a named graph input
	OpFull   // every element = Params[0]
	OpArange // element i = Params[0] + i*Params[1], computed in f64
	// Random sources (random.go): element i is a pure function of the seed
	// and the stream position offset + i (Philox4x32-10, package philox).
	OpRandUniform // Params: RandParams.Encode (lo, hi)
	OpRandNormal  // Params: RandParams.Encode (mean, std)

	// Movement.
	OpView // a strided view of Args[0]
	OpCopy // strided → contiguous copy (Contiguous, reshape of a non-contiguous view)

	// Elementwise unary (float math).
	OpExp
	OpLog
	OpSin
	OpCos
	OpTanh
	OpRecip
	OpSqrt
	OpCeil
	OpFloor
	OpRound
	OpErf
	OpGelu
	OpGeluErf
	OpSilu
	OpSigmoid
	OpNormcdf
	OpElu
	OpPowf
	// Elementwise unary, floats and i64.
	OpNeg
	OpSqr
	OpAbs
	OpSign
	OpRelu
	// Elementwise, every dtype.
	OpAffine
	OpCast
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpMaximum
	OpMinimum
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpWhere

	// Reductions over the trailing Params[0] axes of the argument; the
	// output keeps those axes with size 1.
	OpSum
	OpMax
	OpMin
	OpArgmax // over exactly one trailing axis; u32 index
	OpArgmin

	// Indexing, sorting and data movement: each runs as its own step.
	OpIndexSelect // (src, ids) Params: dim
	OpGather      // (src, ids) Params: dim; output has the ids' shape
	OpScatter     // (dst, ids, src) Params: dim; out = dst with src written at ids
	OpScatterAdd  // (dst, ids, src) Params: dim; out = dst with src added at ids
	OpIndexAdd    // (dst, ids, src) Params: dim; ids is 1-D along dim
	OpCat         // (a, b, …) Params: dim
	OpSliceAssign // (dst, src) Params: dim, start; out = dst with src written at [start, start+len)
	OpArgsort     // (x) Params: descending (0|1); u32 indices along the last dim, stable
	OpCumsum      // (x) Params: dim; inclusive prefix sums along dim, in scan.go's order
	OpAttention   // (q, k, v, start) Params: scale; causal attention with per-sequence offsets (attention.go)

	// Matrix product: its own step (a GEMM).
	OpMatmul // (a, b): a [..., M, K] · b [..., K, N] → [..., M, N]

	// Window ops over NCL / NCHW tensors (see window.go): each runs as its
	// own step.
	OpConv             // (x, w) Params: ConvParams.Encode
	OpConvTranspose    // (x, w) Params: ConvParams.Encode
	OpMaxPool          // (x) Params: PoolParams.Encode
	OpAvgPool          // (x) Params: PoolParams.Encode
	OpUpsampleNearest  // (x) Params: UpsampleParams.Encode
	OpUpsampleBilinear // (x) Params: UpsampleParams.Encode

	// Quantized (GGML block formats, see quant.go): each its own step.
	OpDequantize // (raw u8 [..., R, rowBytes]) Params: format, k → float [..., R, k]
	OpQMatmul    // (x [..., M, k], raw u8 [N, rowBytes]) Params: format, k → x·Wᵀ [..., M, N]

	// Collectives over a group of ranks (see collective.go): each its own
	// step; Name is the group's name.
	OpAllReduce     // (x) Params: CollParams.Encode → op over ranks of x
	OpAllGather     // (x) Params: CollParams.Encode → [size, ...x]: rank r's x at r
	OpReduceScatter // (x [size, ...]) Params: CollParams.Encode → [...]: op over ranks of x[rank]
	OpBroadcast     // (x) Params: CollParams.Encode → root's x

	NumOps
)

// Class groups ops by how executors and fusion treat them.
type Class uint8

// Op classes.
const (
	ClassSource      Class = iota // no arguments: Input, Full, Arange, RandUniform, RandNormal
	ClassView                     // zero-cost view of its argument
	ClassElementwise              // out[i] depends only on args at i (incl. cast, compare, where, copy)
	ClassReduce                   // out[r] reduces row r: the arg's trailing Params[0] axes
	ClassIndex                    // indexing, sorting and data movement: a barrier to fusion
	ClassMatmul                   // matrix products: one GEMM step each, a barrier to fusion
	ClassWindow                   // conv, pools, upsampling over NCHW: one step each, a barrier to fusion
	ClassQuant                    // GGML block formats: dequantize, quantized matmul; one step each, a barrier
	ClassCollective               // all-reduce, all-gather, reduce-scatter, broadcast over a group: one step each, a barrier
)

func (c Class) String() string {
	return [...]string{"source", "view", "elementwise", "reduce", "index", "matmul", "window", "quant", "collective"}[c]
}

// DTypeSet is a set of dtypes.
type DTypeSet uint16

// Common dtype sets.
var (
	AnyDType    = SetOf(dtype.All...)
	FloatDTypes = SetOf(dtype.Floats...)
	IDDTypes    = SetOf(dtype.U8, dtype.U32, dtype.I64) // condition and index dtypes
	SignedTypes = SetOf(dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.F8E4M3, dtype.I64)
)

// ScanDTypes are cumsum's dtypes: every dtype but f8e4m3 (its scan kernels
// have no 8-bit float type; cast to f16 or f32 first).
var ScanDTypes = AnyDType &^ SetOf(dtype.F8E4M3)

// WideFloatDTypes are the floats of 16 bits or more: the float ops with no
// f8e4m3 path take these. f8e4m3 is a storage dtype: elementwise ops and
// reductions compute it in float32, but there is no f8 GEMM (host BLAS,
// cuBLAS/rocBLAS and the portable GEMM take f32, f64, f16 and bf16), so
// matmul, conv and bilinear upsampling refuse it.
var WideFloatDTypes = SetOf(dtype.F32, dtype.F64, dtype.F16, dtype.BF16)

// SetOf builds a set.
func SetOf(ds ...dtype.DType) DTypeSet {
	var s DTypeSet
	for _, d := range ds {
		s |= 1 << d
	}
	return s
}

// Has reports membership.
func (s DTypeSet) Has(d dtype.DType) bool { return s&(1<<d) != 0 }

// List returns the members in dtype.All order.
func (s DTypeSet) List() []dtype.DType {
	var out []dtype.DType
	for _, d := range dtype.All {
		if s.Has(d) {
			out = append(out, d)
		}
	}
	return out
}

func (s DTypeSet) String() string {
	var names []string
	for _, d := range s.List() {
		names = append(names, d.String())
	}
	return strings.Join(names, ",")
}

// OutRule says how an op's output dtype follows from its inputs.
type OutRule uint8

// Output dtype rules.
const (
	OutSame     OutRule = iota // the value arguments' dtype
	OutU8                      // comparisons
	OutDeclared                // chosen by the builder: Input, Full, Arange, Cast
	OutU32                     // argmax, argmin
)

// OpInfo is one row of the op table.
type OpInfo struct {
	Name  string
	Arity int
	Class Class
	// In is the set of dtypes accepted for the value arguments; all value
	// arguments must share one dtype.
	In DTypeSet
	// Cond marks ops whose Args[0] is a condition (dtype in IDDTypes) rather
	// than a value argument.
	Cond   bool
	Out    OutRule
	Params []string // names of Node.Params, in order
}

// The op table. Semantics of every elementwise op (the CPU twin in exec/cpu
// is its executable spec) follow Candle's candle-kernels, with these
// deliberate deviations, each the mathematically right behaviour where
// Candle's differs between dtypes:
//   - f16 and bf16 compute in float32 and round once on store (Candle uses
//     native half arithmetic for most unary ops, losing bits at each step);
//     so does f8e4m3 (Candle evaluates formulas such as gelu and silu in
//     f8e4m3 arithmetic, rounding after every step);
//   - maximum, minimum and relu propagate NaN for every float dtype (Candle's
//     f32/f64 kernels use fmaxf and ignore NaN, its f16/bf16 kernels propagate);
//   - integer division by zero yields 0 (Candle: undefined on the GPU, a panic
//     on the CPU).
var opTable = [NumOps]OpInfo{
	OpInvalid: {Name: "invalid"},
	OpInput:   {Name: "input", Class: ClassSource, In: AnyDType, Out: OutDeclared},
	OpFull:    {Name: "full", Class: ClassSource, In: AnyDType, Out: OutDeclared, Params: []string{"value"}},
	OpArange:  {Name: "arange", Class: ClassSource, In: AnyDType, Out: OutDeclared, Params: []string{"start", "step"}},
	OpView:    {Name: "view", Arity: 1, Class: ClassView, In: AnyDType},
	OpCopy:    {Name: "copy", Arity: 1, Class: ClassElementwise, In: AnyDType},

	OpExp:     unaryFloat("exp"),
	OpLog:     unaryFloat("log"),
	OpSin:     unaryFloat("sin"),
	OpCos:     unaryFloat("cos"),
	OpTanh:    unaryFloat("tanh"),
	OpRecip:   unaryFloat("recip"),
	OpSqrt:    unaryFloat("sqrt"),
	OpCeil:    unaryFloat("ceil"),
	OpFloor:   unaryFloat("floor"),
	OpRound:   unaryFloat("round"),
	OpErf:     unaryFloat("erf"),
	OpGelu:    unaryFloat("gelu"),
	OpGeluErf: unaryFloat("gelu_erf"),
	OpSilu:    unaryFloat("silu"),
	OpSigmoid: unaryFloat("sigmoid"),
	OpNormcdf: unaryFloat("normcdf"),
	OpElu:     {Name: "elu", Arity: 1, Class: ClassElementwise, In: FloatDTypes, Params: []string{"alpha"}},
	OpPowf:    {Name: "powf", Arity: 1, Class: ClassElementwise, In: FloatDTypes, Params: []string{"exp"}},

	OpNeg:  unarySigned("neg"),
	OpSqr:  unarySigned("sqr"),
	OpAbs:  unarySigned("abs"),
	OpSign: unarySigned("sign"),
	OpRelu: unarySigned("relu"),

	OpAffine:  {Name: "affine", Arity: 1, Class: ClassElementwise, In: AnyDType, Params: []string{"mul", "add"}},
	OpCast:    {Name: "cast", Arity: 1, Class: ClassElementwise, In: AnyDType, Out: OutDeclared},
	OpAdd:     binop("add"),
	OpSub:     binop("sub"),
	OpMul:     binop("mul"),
	OpDiv:     binop("div"),
	OpMaximum: binop("maximum"),
	OpMinimum: binop("minimum"),
	OpEq:      compare("eq"),
	OpNe:      compare("ne"),
	OpLt:      compare("lt"),
	OpLe:      compare("le"),
	OpGt:      compare("gt"),
	OpGe:      compare("ge"),
	OpWhere:   {Name: "where", Arity: 3, Class: ClassElementwise, In: AnyDType, Cond: true},

	// Reductions. Sums of f16/bf16 accumulate in float32 (Candle accumulates
	// half sums in half); max and min propagate NaN like maximum; argmax and
	// argmin treat NaN as larger (argmax) or smaller (argmin) than every
	// number, so both return the first NaN's index, and ties go to the first
	// index. Sums of u8 and u32 wrap, like their arithmetic.
	OpSum:    reduceOp("sum", OutSame),
	OpMax:    reduceOp("max", OutSame),
	OpMin:    reduceOp("min", OutSame),
	OpArgmax: reduceOp("argmax", OutU32),
	OpArgmin: reduceOp("argmin", OutU32),

	OpIndexSelect: indexOp("index_select", 2, OutSame, "dim"),
	OpGather:      indexOp("gather", 2, OutSame, "dim"),
	OpScatter:     indexOp("scatter", 3, OutSame, "dim"),
	OpScatterAdd:  indexOp("scatter_add", 3, OutSame, "dim"),
	OpIndexAdd:    indexOp("index_add", 3, OutSame, "dim"),
	OpCat:         indexOp("cat", -1, OutSame, "dim"),
	OpSliceAssign: indexOp("slice_assign", 2, OutSame, "dim", "start"),
	// argsort is stable: equal keys keep their order; NaN sorts last
	// ascending and first descending (descending is the reverse order of
	// ascending keys, with ties still in index order).
	OpArgsort: indexOp("argsort", 1, OutU32, "descending"),
	// cumsum is a scan, not an indexing op, but it is classed with them: it
	// runs as its own step (a barrier to fusion), reads its operand through
	// its layout, and its GPU kernel is planned by package kernels like the
	// others. Every dtype: floats add in the order scan.go defines (f16 and
	// bf16 in float32, each output rounded once), integers wrap.
	OpCumsum: func() OpInfo { i := indexOp("cumsum", 1, OutSame, "dim"); i.In = ScanDTypes; return i }(),
	// attention, like cumsum, is classed with the indexing ops: its own
	// step, operands read through their layouts, the GPU kernel planned by
	// package kernels. q, k, v and the output share a wide float dtype;
	// start is u32 (attention.go).
	OpAttention: func() OpInfo { i := indexOp("attention", 4, OutSame, "scale"); i.In = WideFloatDTypes; return i }(),

	// matmul follows Candle's matmul/broadcast_matmul: the last two dims
	// are contracted (a [..., M, K] · b [..., K, N] → [..., M, N]); the
	// builder broadcasts the batch dims (numpy rules), so both args have the
	// output's batch dims, as views. Floats only (Candle has no integer
	// matmul) and not f8e4m3 (no f8 GEMM); f16 and bf16 accumulate in
	// float32 and round once on store.
	OpMatmul: {Name: "matmul", Arity: 2, Class: ClassMatmul, In: WideFloatDTypes},

	OpConv:             windowOp("conv", 2, WideFloatDTypes, convParamNames),
	OpConvTranspose:    windowOp("conv_transpose", 2, WideFloatDTypes, convParamNames),
	OpMaxPool:          windowOp("max_pool", 1, PoolDTypes, poolParamNames),
	OpAvgPool:          windowOp("avg_pool", 1, PoolDTypes, poolParamNames),
	OpUpsampleNearest:  windowOp("upsample_nearest", 1, PoolDTypes, upsampleParamNames),
	OpUpsampleBilinear: windowOp("upsample_bilinear", 1, WideFloatDTypes, upsampleParamNames),

	OpDequantize: {Name: "dequantize", Arity: 1, Class: ClassQuant, In: SetOf(dtype.U8), Out: OutDeclared, Params: []string{"format", "k"}},
	OpQMatmul:    {Name: "qmatmul", Arity: 2, Class: ClassQuant, In: QuantActDTypes, Params: []string{"format", "k"}},

	OpAllReduce:     collectiveOp("all_reduce"),
	OpAllGather:     collectiveOp("all_gather"),
	OpReduceScatter: collectiveOp("reduce_scatter"),
	OpBroadcast:     collectiveOp("broadcast"),

	// Random sources (random.go): floats only.
	OpRandUniform: {Name: "rand", Class: ClassSource, In: RandDTypes, Out: OutDeclared, Params: randParamNames("lo", "hi")},
	OpRandNormal:  {Name: "randn", Class: ClassSource, In: RandDTypes, Out: OutDeclared, Params: randParamNames("mean", "std")},
}

// IDArg returns the index of an indexing op's ids argument, or -1.
func (i *OpInfo) IDArg() int {
	switch i.Name {
	case "index_select", "gather", "scatter", "scatter_add", "index_add":
		return 1
	}
	return -1
}

// Indexing ops follow Candle's indexing.cu, sort.cu and fill.cu (see
// shared/candle-kernels.md §6, §8, §10): ids are u8, u32 or i64 and Args[1]
// of the ops that take them; an id equal to its dtype's maximum value is a
// sentinel (reads give 0, writes are skipped); any other id outside
// [0, dim size) — negative i64 ids included — is an error on every executor
// (Candle trips a device assert and aborts; Loom's run returns an error
// naming the op and the id). gather follows Candle's CPU convention: the
// output has the ids' shape, and ids match src on every dim but dim.
// Duplicate ids: scatter keeps the last write, scatter_add and index_add
// add every contribution in order.
func indexOp(name string, arity int, out OutRule, params ...string) OpInfo {
	return OpInfo{Name: name, Arity: arity, Class: ClassIndex, In: AnyDType, Out: out, Params: params}
}

func reduceOp(name string, out OutRule) OpInfo {
	return OpInfo{Name: name, Arity: 1, Class: ClassReduce, In: AnyDType, Out: out, Params: []string{"axes"}}
}

// ReduceAxes returns how many trailing axes a reduction reduces.
func (n *Node) ReduceAxes() int { return int(n.Params[0]) }

// RowLen returns the number of elements each output of a reduction reduces.
func (n *Node) RowLen() int {
	a := n.Args[0].Shape
	return Numel(a[len(a)-n.ReduceAxes():])
}

func unaryFloat(name string) OpInfo {
	return OpInfo{Name: name, Arity: 1, Class: ClassElementwise, In: FloatDTypes}
}

func unarySigned(name string) OpInfo {
	return OpInfo{Name: name, Arity: 1, Class: ClassElementwise, In: SignedTypes}
}

func binop(name string) OpInfo {
	return OpInfo{Name: name, Arity: 2, Class: ClassElementwise, In: AnyDType}
}

func compare(name string) OpInfo {
	return OpInfo{Name: name, Arity: 2, Class: ClassElementwise, In: AnyDType, Out: OutU8}
}

// Info returns the op's table row.
func (o Op) Info() *OpInfo {
	if o >= NumOps {
		return &opTable[OpInvalid]
	}
	return &opTable[o]
}

func (o Op) String() string { return o.Info().Name }

// Ops lists every valid op in table order.
func Ops() []Op {
	var out []Op
	for o := OpInput; o < NumOps; o++ {
		out = append(out, o)
	}
	return out
}

// OpByName finds an op by its table name.
func OpByName(name string) (Op, error) {
	for o := OpInput; o < NumOps; o++ {
		if opTable[o].Name == name {
			return o, nil
		}
	}
	return OpInvalid, fmt.Errorf("ir: unknown op %q", name)
}

// ValueArgs returns the index of the first value argument (1 for ops with a
// condition, else 0).
func (i *OpInfo) ValueArgs() int {
	if i.Cond {
		return 1
	}
	return 0
}

// OutDType returns the dtype an op produces from value arguments of dtype in,
// for rules other than OutDeclared.
func (i *OpInfo) OutDType(in dtype.DType) dtype.DType {
	switch i.Out {
	case OutU8:
		return dtype.U8
	case OutU32:
		return dtype.U32
	}
	return in
}
