//! The layout `src/value.rs` relies on: its one-store word sets the same
//! bits of `ngx_variable_value_t` as the bindings' own field setters, for
//! every field, against the nginx tree the module is built for. The module
//! itself is a cdylib that needs nginx's symbols, so this test includes the
//! file by path (it uses only the bindings' types).

#[path = "../src/value.rs"]
#[allow(dead_code)]
mod value;

use ngx::ffi::ngx_variable_value_t;

fn fresh() -> ngx_variable_value_t {
    // SAFETY: a plain C struct of an integer bit field and a pointer; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The value as the bindings' setters make it.
fn by_setters(len: u32, valid: bool, no_cacheable: bool, not_found: bool) -> ngx_variable_value_t {
    let mut v = fresh();
    v.set_len(len);
    v.set_valid(valid as u32);
    v.set_no_cacheable(no_cacheable as u32);
    v.set_not_found(not_found as u32);
    v.set_escape(0);
    v
}

fn bits(v: &ngx_variable_value_t) -> ngx::ffi::__BindgenBitfieldUnit<[u8; 4]> {
    v._bitfield_1
}

fn unit(word: u32) -> ngx::ffi::__BindgenBitfieldUnit<[u8; 4]> {
    ngx::ffi::__BindgenBitfieldUnit::new(word.to_le_bytes())
}

#[test]
fn one_store_writes_what_the_field_setters_write() {
    let data = vec![b'x'; 300];
    for len in [0usize, 1, 2, 7, 8, 255, 256, 300] {
        for no_cacheable in [false, true] {
            let mut v = fresh();
            value::set(&mut v, &data[..len], no_cacheable);
            let expected = by_setters(len as u32, true, no_cacheable, false);
            assert_eq!(bits(&v), bits(&expected), "len {len}, no_cacheable {no_cacheable}");
            assert_eq!((v.len() as usize, v.valid(), v.no_cacheable(), v.not_found(), v.escape()), (len, 1, no_cacheable as u32, 0, 0));
            assert_eq!(v.data as *const u8, data.as_ptr());
        }
    }
    // every bit of the length, one at a time, and the longest length
    for bit in 0..28 {
        let len = 1u32 << bit;
        assert_eq!(unit(value::found_word(len as usize, false)), bits(&by_setters(len, true, false, false)), "bit {bit}");
    }
    let max = value::MAX_LEN as u32;
    assert_eq!(unit(value::found_word(value::MAX_LEN, true)), bits(&by_setters(max, true, true, false)));
    let mut v = fresh();
    value::set_not_found(&mut v);
    assert_eq!(bits(&v), bits(&by_setters(0, false, false, true)));
    // a stale value is overwritten whole: no flag survives
    let mut v = by_setters(max, true, true, true);
    v.set_escape(1);
    value::set(&mut v, b"ok", false);
    assert_eq!((v.len(), v.valid(), v.no_cacheable(), v.not_found(), v.escape()), (2, 1, 0, 0, 0));
}
