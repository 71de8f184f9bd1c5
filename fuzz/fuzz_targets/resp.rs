//! RESP frames and requests over arbitrary bytes: see
//! `emberkv_server::fuzzing::resp`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| emberkv_server::fuzzing::resp(data));
