//! `testdata/good` policies load; each `testdata/bad` policy fails with the
//! errors its `# expect: LINE:COL MESSAGE` lines name (the message is a prefix).

use std::fs;
use std::path::Path;

fn files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(dir);
    let mut v: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn good_policies_load() {
    for path in files("good") {
        if let Err(e) = crawlward_policy::load(&path) {
            panic!("{} should load:\n{e}", path.display());
        }
    }
}

#[test]
fn bad_policies_fail_with_their_expected_errors() {
    let mut failures = Vec::new();
    for path in files("bad") {
        let text = fs::read_to_string(&path).unwrap();
        let expected: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# expect: ")).collect();
        assert!(!expected.is_empty(), "{} has no # expect: line", path.display());
        let err = match crawlward_policy::load(&path) {
            Ok(_) => {
                failures.push(format!("{}: loaded, but should fail", path.display()));
                continue;
            }
            Err(e) => e,
        };
        let got: Vec<String> = err
            .problems
            .iter()
            .map(|p| {
                let at = p.position.map(|q| format!("{}:{}", q.line, q.column)).unwrap_or_else(|| "?:?".into());
                if p.path.is_empty() {
                    format!("{at} {}", p.message)
                } else {
                    format!("{at} {}: {}", p.path, p.message)
                }
            })
            .collect();
        if got.len() != expected.len() || !expected.iter().zip(&got).all(|(e, g)| g.starts_with(e)) {
            failures.push(format!("{}:\n  expected: {expected:#?}\n  got:      {got:#?}", path.display()));
        }
        // the printed report names the file, line and column of every problem
        let printed = err.to_string();
        for p in &err.problems {
            if let Some(pos) = p.position {
                let at = format!("{}:{}:{}", path.display(), pos.line, pos.column);
                assert!(printed.contains(&at), "{printed}\nshould name {at}");
            }
        }
        assert!(printed.ends_with("nothing was written"), "{printed}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
