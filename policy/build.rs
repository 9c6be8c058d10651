//! Embeds the range files shipped with crawlward (`ranges/*.json`, the dated
//! snapshot) so that verification by published ranges works before the first
//! `crawlward update-ranges`.

use std::{env, fs, path::Path};

fn main() {
    // the manifest directory as cargo gives it to this run, not as it was when
    // this script was compiled: a target directory moved with its checkout
    // must not embed an empty snapshot in silence
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("ranges");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the shipped range files in {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert!(!files.is_empty(), "no range files (*.json) in {}", dir.display());
    files.sort();
    let mut out = String::from("/// The shipped range files, as JSON text.\nstatic SNAPSHOT: &[&str] = &[\n");
    for f in &files {
        println!("cargo::rerun-if-changed={}", f.display());
        out.push_str(&format!("    include_str!({:?}),\n", f.display().to_string()));
    }
    out.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("ranges_snapshot.rs"), out).unwrap();
}
