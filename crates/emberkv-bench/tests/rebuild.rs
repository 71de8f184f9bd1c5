//! A run survives its executable being replaced on disk (a `cargo build`
//! into the same target directory while a board runs).

use std::process::Command;

/// Until 2026-12-04 each worker was started from the executable's path,
/// so a rebuild during a run made the later workers another program (or
/// none, while the linker wrote it) and their cells were lost.
#[cfg(target_os = "linux")]
#[test]
fn a_run_survives_its_executable_being_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("emberkv-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_emberkv-bench"), &exe).unwrap();
    let out = dir.path().join("out");
    let mut run = Command::new(&exe)
        .args(["run", "--engines", "emberkv", "--workloads", "readrandom"])
        .args(["--keys", "2000", "--duration", "0.05", "--reps", "1"])
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    // `spawn` returns once the process runs the copy; every worker starts
    // after this.
    let replacement = dir.path().join("replacement");
    std::fs::write(&replacement, b"#!/bin/sh\nexit 3\n").unwrap();
    std::fs::rename(&replacement, &exe).unwrap();
    assert!(run.wait().unwrap().success());
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    let results: serde_json::Value = serde_json::from_str(&results).unwrap();
    let cells = results["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    for cell in cells {
        assert_eq!(cell["status"], "ok", "{cell}");
    }
}
