// Package dtype names Loom's element types and converts between them.
//
// Seven dtypes are supported: f32, f64, f16, bf16, u8, u32 and i64. f16 and
// bf16 are stored as their raw 16-bit patterns (Float16, BFloat16); every
// conversion into them rounds to nearest, ties to even, exactly as IEEE 754
// specifies, including subnormals, infinities and NaN.
//
// Arithmetic on the CPU happens in one of three compute kinds (Kind): f16,
// bf16 and f32 widen to float32, f64 stays float64, and the integer dtypes
// widen to int64 (wrapping on store, like C and Rust integer arithmetic).
package dtype
