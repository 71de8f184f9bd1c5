//! Command scripts run through the server's dispatcher, checked against a
//! model: see `emberkv_server::fuzzing::commands`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| emberkv_server::fuzzing::commands(data));
