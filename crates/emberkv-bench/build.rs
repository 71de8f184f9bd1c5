//! Records, for the board's environment header, the compiler version and
//! the locked version of every direct dependency of the harness (so each
//! engine's crate version is reported as built).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::{env, fs};

fn main() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=EMBERKV_BENCH_RUSTC={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");

    let manifest = env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let lock = Path::new(&manifest).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    let mut out = String::from("/// `(crate, locked version)` of each direct dependency.\n");
    out.push_str("pub const LOCKED: &[(&str, &str)] = &[\n");
    for (name, version) in direct_dependencies(&text, &env::var("CARGO_PKG_NAME").unwrap()) {
        out.push_str(&format!("    ({name:?}, {version:?}),\n"));
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("set by cargo")).join("locked.rs");
    fs::write(dest, out).expect("writing locked.rs");
}

/// The direct dependencies of package `me` in the lock file `text`, with
/// their versions.
fn direct_dependencies(text: &str, me: &str) -> Vec<(String, String)> {
    let mut packages: Vec<(String, String, Vec<String>)> = Vec::new();
    for block in text.split("[[package]]").skip(1) {
        let field = |name: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
                .map(|v| v.trim_end_matches('"').to_owned())
        };
        let deps = block
            .split_once("dependencies = [")
            .map(|(_, rest)| {
                rest.split(']')
                    .next()
                    .unwrap_or("")
                    .lines()
                    .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_owned())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if let (Some(name), Some(version)) = (field("name"), field("version")) {
            packages.push((name, version, deps));
        }
    }
    let mut by_name: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, version, _) in &packages {
        by_name.entry(name).or_default().push(version);
    }
    let Some((_, _, deps)) = packages.iter().find(|(name, _, _)| name == me) else {
        return Vec::new();
    };
    deps.iter()
        .filter_map(|dep| match dep.split_once(' ') {
            Some((name, version)) => Some((name.to_owned(), version.to_owned())),
            None => {
                let versions = by_name.get(dep.as_str())?;
                Some((dep.clone(), versions.first()?.to_string()))
            }
        })
        .collect()
}
