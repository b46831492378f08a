#![no_main]
// The `controller_log` target of crates/fuzz (docs/fuzzing.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| onepipe_fuzz::targets::controller_log::run(data));
