//! Writing outputs atomically: each file goes to a temporary file in the
//! target directory and is renamed over the old one, so nginx never reads a
//! half-written file. Files whose content did not change are left alone.

use std::fs;
use std::io::Write;
use std::path::Path;

/// What happened to one output file.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    Created,
    Changed,
    Unchanged,
}

pub fn write_all(dir: &Path, files: &[(&str, String)]) -> std::io::Result<Vec<(String, Written)>> {
    fs::create_dir_all(dir)?;
    let mut report = Vec::new();
    for (name, content) in files {
        let target = dir.join(name);
        let state = match fs::read(&target) {
            Ok(old) if old == content.as_bytes() => Written::Unchanged,
            Ok(_) => Written::Changed,
            Err(_) => Written::Created,
        };
        if state != Written::Unchanged {
            let mut tmp = tempfile::Builder::new().prefix(&format!(".{name}.")).tempfile_in(dir)?;
            tmp.write_all(content.as_bytes())?;
            tmp.as_file().sync_all()?;
            set_readable(tmp.path())?;
            tmp.persist(&target).map_err(|e| e.error)?;
        }
        report.push((name.to_string(), state));
    }
    Ok(report)
}

/// nginx workers (often `nobody` or `www-data`) read robots.txt: 0644, not tempfile's 0600.
fn set_readable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
}
