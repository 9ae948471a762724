// Package dtype names Loom's element types and converts between them.
//
// Eight dtypes are supported: f32, f64, f16, bf16, f8e4m3, u8, u32 and i64.
// f16 and bf16 are stored as their raw 16-bit patterns (Float16, BFloat16);
// every conversion into them rounds to nearest, ties to even, exactly as IEEE
// 754 specifies, including subnormals, infinities and NaN. f8e4m3 (OCP
// E4M3FN, Float8E4M3) is stored as its 8-bit pattern; conversions into it
// round to nearest even and, having no infinity, saturate out-of-range
// values to ±448, as Candle's float8 crate does (see Float8E4M3).
//
// Arithmetic on the CPU happens in one of three compute kinds (Kind): f16,
// bf16, f8e4m3 and f32 widen to float32, f64 stays float64, and the integer
// dtypes widen to int64 (wrapping on store, like C and Rust integer
// arithmetic).
package dtype
