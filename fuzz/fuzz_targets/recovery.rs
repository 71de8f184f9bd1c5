//! Recovery over arbitrary store files: see `emberkv::fuzzing::recovery`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temporary directory");
    emberkv::fuzzing::recovery(dir.path(), data);
});
