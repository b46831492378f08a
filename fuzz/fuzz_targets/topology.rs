#![no_main]
// The `topology` target of crates/fuzz (docs/fuzzing.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| onepipe_fuzz::targets::topology::run(data));
