//! Record decoding over arbitrary bytes: see `emberkv::fuzzing::record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| emberkv::fuzzing::record(data));
