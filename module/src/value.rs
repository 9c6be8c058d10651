//! Writing a variable's value for nginx.
//!
//! `ngx_variable_value_t` keeps the value's length and its four flags in one
//! 32-bit bit field (`unsigned len:28; valid:1; no_cacheable:1; not_found:1;
//! escape:1`). The generated bindings set each field bit by bit, 28
//! iterations for the length alone, on every read of a variable; here the
//! whole word is written in one store. `module/tests/value_layout.rs` checks
//! the word against the bindings' own setters for every field.

use ngx::ffi::{__BindgenBitfieldUnit, ngx_variable_value_t};

// The word's bits are laid out as x86-64 and aarch64 compilers lay out the
// fields (from the least significant bit): the layout test checks it, and
// this keeps a big-endian build from starting without it.
const _: () = assert!(cfg!(target_endian = "little"), "value.rs writes the bit field for little-endian targets");

/// The longest value the 28-bit length holds.
pub const MAX_LEN: usize = (1 << 28) - 1;

const VALID: u32 = 1 << 28;
const NO_CACHEABLE: u32 = 1 << 29;
const NOT_FOUND: u32 = 1 << 30;

/// The bit field of a found value of `len` bytes (at most [`MAX_LEN`]).
pub const fn found_word(len: usize, no_cacheable: bool) -> u32 {
    (len & MAX_LEN) as u32 | VALID | if no_cacheable { NO_CACHEABLE } else { 0 }
}

/// The bit field of a value that is not found.
pub const fn not_found_word() -> u32 {
    NOT_FOUND
}

/// Set `v` to the bytes at `data` (which must outlive the request's use of
/// the variable: the request's pool, the configuration, or static memory).
/// `no_cacheable`: the value may change later in the request, so nginx asks
/// again where it flushes variables (complex values, the access log). A value
/// longer than [`MAX_LEN`] is cut to it.
pub fn set(v: &mut ngx_variable_value_t, data: &[u8], no_cacheable: bool) {
    v.data = data.as_ptr() as *mut u8;
    v._bitfield_1 = __BindgenBitfieldUnit::new(found_word(data.len().min(MAX_LEN), no_cacheable).to_le_bytes());
}

/// Mark `v` as not found.
pub fn set_not_found(v: &mut ngx_variable_value_t) {
    v._bitfield_1 = __BindgenBitfieldUnit::new(not_found_word().to_le_bytes());
}
