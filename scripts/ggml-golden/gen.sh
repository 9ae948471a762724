#!/usr/bin/env bash
# gen.sh regenerates quant/testdata/ggml-golden.json from GGML's own C code.
#
# Usage (from anywhere in the repository):
#
#	scripts/ggml-golden/gen.sh GGML_DIR
#
# GGML_DIR is a checkout of github.com/ggml-org/ggml (its src/ and include/
# are used; nothing of it is copied into this repository). The script
# compiles driver.c with GGML's src/ggml-quants.c (the reference quantizers
# and dequantizers) and src/ggml-cpu/quants.c (the generic vec_dot
# functions) in a temporary directory, then runs quant/internal/ggmlgolden, which writes the
# inputs of quant/internal/testvec, runs the driver on them and records the
# results.
#
# Flags: -O3 -DNDEBUG as GGML's release build, and -ffp-contract=off so
# that no a*b+c is fused into an FMA even where the compiler targets a CPU
# with FMA: the golden results are the plain IEEE float32 evaluation of
# GGML's reference code (what GGML's x86-64 baseline build computes), the
# semantics package quant reproduces on every platform. On x86-64 the
# float→int8 casts in GGML's reference code behave as cvttss2si (see
# quant/scalar.go); build on x86-64.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1/src/ggml-quants.c" ]; then
	echo "usage: $0 GGML_DIR   (a ggml checkout with src/ggml-quants.c)" >&2
	exit 2
fi
ggml=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(uname -m)" != x86_64 ]; then
	echo "gen.sh: the golden file is defined by an x86-64 build of GGML; this is $(uname -m)" >&2
	exit 2
fi
commit=$(git -C "$ggml" rev-parse HEAD 2>/dev/null || echo unknown)
cc=${CC:-gcc}
cflags="-O3 -DNDEBUG -ffp-contract=off -std=gnu11"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086
"$cc" $cflags -w -I"$ggml/include" -I"$ggml/src" -I"$ggml/src/ggml-cpu" \
	"$root/scripts/ggml-golden/driver.c" "$ggml/src/ggml-quants.c" "$ggml/src/ggml-cpu/quants.c" \
	-lm -o "$work/driver"
cd "$root"
go run ./quant/internal/ggmlgolden -driver "$work/driver" -out quant/testdata/ggml-golden.json \
	-ggml-commit "$commit" -cc "$("$cc" --version | head -1)" -cflags "$cflags"
