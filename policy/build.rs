//! Embeds the range files shipped with crawlward (`ranges/*.json`, the dated
//! snapshot) so that verification by published ranges works before the first
//! `crawlward update-ranges`.

use std::{env, fs, path::Path};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ranges");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect())
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("/// The shipped range files, as JSON text.\nstatic SNAPSHOT: &[&str] = &[\n");
    for f in &files {
        println!("cargo::rerun-if-changed={}", f.display());
        out.push_str(&format!("    include_str!({:?}),\n", f.display().to_string()));
    }
    out.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").unwrap()).join("ranges_snapshot.rs"), out).unwrap();
}
