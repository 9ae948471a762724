// Command ggml-golden writes quant/testdata/ggml-golden.json: what GGML's
// own C code (run through scripts/ggml-golden/driver.c, built by gen.sh) produces for the
// inputs of quant/internal/testvec — quantized bytes, dequantized floats
// and generic vec_dot results, as hashes plus a few raw blocks.
//
// Run it through scripts/ggml-golden/gen.sh, which compiles the driver against a ggml checkout;
// it is not meant to be run by hand.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/quant/internal/testvec"
)

// A golden type: its GGML number, name, and the activation type GGML's
// CPU backend pairs it with (0 = no generic vec_dot). Written out here
// rather than taken from package quant, whose tables are what the golden
// file checks.
type gtype struct {
	id   uint32
	name string
	act  uint32
}

var types = []gtype{
	{0, "f32", 0}, {1, "f16", 0}, {30, "bf16", 0},
	{2, "q4_0", 8}, {3, "q4_1", 9}, {6, "q5_0", 8}, {7, "q5_1", 9},
	{8, "q8_0", 8}, {9, "q8_1", 0},
	{10, "q2_k", 15}, {11, "q3_k", 15}, {12, "q4_k", 15}, {13, "q5_k", 15},
	{14, "q6_k", 15}, {15, "q8_k", 0},
}

var (
	driver = flag.String("driver", "", "the compiled driver.c")
	out    = flag.String("out", "quant/testdata/ggml-golden.json", "output file")
	commit = flag.String("ggml-commit", "", "the ggml commit the driver was built from")
	cc     = flag.String("cc", "", "compiler version line")
	cflags = flag.String("cflags", "", "compiler flags")
)

var tmp string

func main() {
	log.SetFlags(0)
	flag.Parse()
	if *driver == "" || *commit == "" {
		log.Fatal("ggml-golden: -driver and -ggml-commit are required (run scripts/ggml-golden/gen.sh)")
	}
	var err error
	tmp, err = os.MkdirTemp("", "ggml-golden")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	g := testvec.Golden{
		Generator:  "scripts/ggml-golden/gen.sh (driver.c + quant/internal/ggmlgolden)",
		GGMLCommit: *commit,
		CC:         *cc,
		CFlags:     *cflags,
		N:          testvec.N,
		Seed:       testvec.Seed,
		Inputs:     map[string]string{},
		Sizes:      map[uint32][2]int{},
	}
	for _, line := range strings.Split(strings.TrimSpace(run("sizes")), "\n") {
		f := strings.Fields(line)
		id, _ := strconv.Atoi(f[0])
		blk, _ := strconv.Atoi(f[1])
		size, _ := strconv.Atoi(f[2])
		g.Sizes[uint32(id)] = [2]int{blk, size}
	}

	inputs := testvec.Inputs()
	inFile := map[string]string{}
	for _, c := range inputs {
		inFile[c.Name] = writeF32(c.Name, c.Data)
		g.Inputs[c.Name] = sha(f32bytes(c.Data))
	}
	act := testvec.Activation()
	actFile := writeF32("activation", act)
	g.Inputs["activation"] = sha(f32bytes(act))

	// The activation rows every dot uses: GGML's quantization of
	// Activation(), and random blocks.
	actQ, actR := map[uint32]string{}, map[uint32]string{}
	for _, t := range types {
		if t.act == 0 {
			continue
		}
		if _, ok := actQ[t.act]; !ok {
			actQ[t.act] = filepath.Join(tmp, fmt.Sprintf("act_%d.q", t.act))
			run("quant", id(t.act), actFile, actQ[t.act])
			blk := g.Sizes[t.act][0]
			actR[t.act] = writeBytes(fmt.Sprintf("act_%d.rand", t.act), testvec.Random(t.act, testvec.N/blk, 1))
		}
	}

	for _, t := range types {
		blk, size := g.Sizes[t.id][0], g.Sizes[t.id][1]
		for _, c := range inputs {
			e := testvec.Entry{Type: t.id, Name: t.name, Input: c.Name}
			q := filepath.Join(tmp, t.name+"_"+c.Name+".q")
			run("quant", id(t.id), inFile[c.Name], q)
			qb := read(q)
			e.Quant = sha(qb)
			e.FirstBlock = hex.EncodeToString(qb[:size])
			dequant(&e, t, q)
			dots(&e, t, blk, q, actQ[t.act])
			g.Entries = append(g.Entries, e)
		}
		e := testvec.Entry{Type: t.id, Name: t.name, Input: "random"}
		r := writeBytes(t.name+".rand", testvec.Random(t.id, testvec.N/blk, 0))
		dequant(&e, t, r)
		dots(&e, t, blk, r, actR[t.act])
		g.Entries = append(g.Entries, e)
	}
	// The activation row's own quantizations are checked too (entries
	// with Input "activation").
	for _, t := range types {
		if p, ok := actQ[t.id]; ok {
			qb := read(p)
			e := testvec.Entry{Type: t.id, Name: t.name, Input: "activation", Quant: sha(qb), FirstBlock: hex.EncodeToString(qb[:g.Sizes[t.id][1]])}
			g.Entries = append(g.Entries, e)
		}
	}

	sweep := writeF32("sweep", testvec.F16Sweep())
	h16, b16 := filepath.Join(tmp, "sweep.f16"), filepath.Join(tmp, "sweep.bf16")
	run("f16", sweep, h16, b16)
	g.F16FromF32, g.BF16FromF32 = sha(read(h16)), sha(read(b16))
	all := filepath.Join(tmp, "f16to32")
	run("f16to32", all)
	g.F16ToF32 = sha(read(all))

	js, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, append(js, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("ggml-golden: %d entries, %d bytes -> %s", len(g.Entries), len(js)+1, *out)
}

// dequant records GGML's dequantization of the blocks in file q (GGML has
// no dequantizer for Q8_1).
func dequant(e *testvec.Entry, t gtype, q string) {
	if t.id == 9 {
		return
	}
	d := q + ".dq"
	run("dequant", id(t.id), q, d)
	db := read(d)
	e.Dequant = sha(db)
	for i := 0; i < 8; i++ {
		e.DequantHead = append(e.DequantHead, binary.LittleEndian.Uint32(db[4*i:]))
	}
}

// dots records GGML's generic vec_dot of the weight blocks in file w with
// the activation blocks in file a over each prefix length.
func dots(e *testvec.Entry, t gtype, blk int, w, a string) {
	if t.act == 0 {
		return
	}
	e.Act = t.act
	for _, n := range testvec.DotLengths(blk) {
		s := strings.TrimSpace(run("dot", id(t.id), w, id(t.act), a, strconv.Itoa(n)))
		bits, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			log.Fatalf("dot output %q: %v", s, err)
		}
		e.Dots = append(e.Dots, testvec.Dot{N: n, Bits: uint32(bits)})
	}
}

func run(args ...string) string {
	cmd := exec.Command(*driver, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		log.Fatalf("driver %v: %v\n%s", args, err, stderr.String())
	}
	return string(o)
}

func id(t uint32) string { return strconv.Itoa(int(t)) }

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func writeF32(name string, v []float32) string { return writeBytes(name+".f32", f32bytes(v)) }

func writeBytes(name string, b []byte) string {
	p := filepath.Join(tmp, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		log.Fatal(err)
	}
	return p
}

func read(p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
