#![no_main]
// The `cosy` target of crates/fuzz (docs/fuzzing.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| onepipe_fuzz::targets::cosy::run(data));
