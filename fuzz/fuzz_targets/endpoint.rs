#![no_main]
// The `endpoint` target of crates/fuzz (docs/fuzzing.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| onepipe_fuzz::targets::endpoint::run(data));
