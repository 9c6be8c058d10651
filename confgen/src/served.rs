//! Whether nginx's workers can read the files nginx serves from the rendered
//! directory: robots.txt, which the server snippet serves with `alias`.
//! `nginx -t` does not open `alias` files, so a robots.txt in a directory the
//! worker user cannot enter passes the test and answers 403 (`crawlward
//! check`).
//!
//! Decided from the mode bits of each directory on the way and of the file,
//! for the worker user's uid and groups (`id`); access control lists are not
//! read.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The user nginx's workers run as, and where that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerUser {
    pub name: String,
    pub source: String,
}

/// A user's uid and every group id it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub groups: Vec<u32>,
}

/// What `nginx -V` says of how `nginx` was built (empty when it does not run).
pub fn build_of(nginx: &str) -> String {
    Command::new(nginx).arg("-V").output().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default()
}

/// The value of one configure argument in [`build_of`]'s text: `flag` with its `=`.
pub fn configured<'a>(build: &'a str, flag: &str) -> Option<&'a str> {
    build.split_whitespace().find_map(|w| w.strip_prefix(flag))
}

/// The worker user: `--worker-user`, else the first `user` directive of the
/// main configuration `nginx -V` names (`--conf-path`), else nginx's
/// compiled `--user`, else `nobody`, nginx's own default.
pub fn worker_user(given: Option<&str>, nginx: &str) -> WorkerUser {
    if let Some(name) = given {
        return WorkerUser { name: name.to_string(), source: "--worker-user".into() };
    }
    let build = build_of(nginx);
    if let Some(conf) = configured(&build, "--conf-path=") {
        if let Some(name) = std::fs::read_to_string(conf).ok().and_then(|text| user_directive(&text)) {
            return WorkerUser { name, source: format!("the user directive of {conf}") };
        }
    }
    match configured(&build, "--user=") {
        Some(name) => WorkerUser { name: name.to_string(), source: format!("{nginx} -V (--user)") },
        None => WorkerUser { name: "nobody".into(), source: "nginx's default".into() },
    }
}

/// The user of the first `user` directive at the start of a line (the main
/// context's, in a usual nginx.conf), comments left out.
fn user_directive(conf: &str) -> Option<String> {
    conf.lines().map(|l| l.split('#').next().unwrap_or("").trim()).find_map(|l| {
        let rest = l.strip_prefix("user")?;
        if !rest.starts_with([' ', '\t']) {
            return None;
        }
        let name = rest.trim().trim_end_matches(';').split_whitespace().next()?;
        Some(name.trim_matches(['"', '\'']).to_string())
    })
}

/// The uid and groups of `user`, as `id` says; None when there is no such user.
pub fn ids(user: &str) -> Option<Ids> {
    let run = |flag: &str| -> Option<String> {
        let o = Command::new("id").arg(flag).arg("--").arg(user).output().ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let uid = run("-u")?.parse().ok()?;
    let groups = run("-G")?.split_whitespace().filter_map(|g| g.parse().ok()).collect();
    Some(Ids { uid, groups })
}

/// Why `ids` cannot read `file`: the first directory on the way it cannot
/// enter, or the file itself; None when it can.
pub fn cannot_read(file: &Path, ids: &Ids) -> Option<String> {
    let mut on_the_way: Vec<PathBuf> = file.ancestors().skip(1).map(Path::to_path_buf).collect();
    on_the_way.reverse();
    for dir in on_the_way {
        match std::fs::metadata(&dir) {
            Ok(m) if allows(&m, ids, 0o1) => {}
            Ok(m) => return Some(format!("it cannot enter {} ({})", dir.display(), described(&m))),
            Err(e) => return Some(format!("{}: {e}", dir.display())),
        }
    }
    match std::fs::metadata(file) {
        Ok(m) if allows(&m, ids, 0o4) => None,
        Ok(m) => Some(format!("it cannot read {} ({})", file.display(), described(&m))),
        Err(e) => Some(format!("{}: {e}", file.display())),
    }
}

/// Whether the mode bits give `ids` the access `bit` (4 read, 1 execute).
fn allows(m: &std::fs::Metadata, ids: &Ids, bit: u32) -> bool {
    let mode = m.mode();
    if ids.uid == 0 {
        // root reads any file and enters any directory, whatever their bits
        return true;
    }
    let shift = if ids.uid == m.uid() {
        6
    } else if ids.groups.contains(&m.gid()) {
        3
    } else {
        0
    };
    (mode >> shift) & bit != 0
}

fn described(m: &std::fs::Metadata) -> String {
    format!("mode {:04o}, owner {}, group {}", m.mode() & 0o7777, m.uid(), m.gid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_user_directive_of_a_main_configuration() {
        assert_eq!(user_directive("# user nobody;\nuser www-data;\nworker_processes auto;\n"), Some("www-data".into()));
        assert_eq!(user_directive("user  nginx nginx;  # the group too\n"), Some("nginx".into()));
        assert_eq!(user_directive("user_agent x;\nevents {}\n"), None);
        assert_eq!(user_directive("events {}\n"), None);
    }

    #[test]
    fn a_directory_on_the_way_closed_to_others_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("crawlward");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("robots.txt");
        std::fs::write(&file, "User-agent: *\n").unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let other = Ids { uid: 4_000_000, groups: vec![4_000_000] };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = cannot_read(&file, &other).expect("closed");
        assert!(why.starts_with(&format!("it cannot enter {} (mode 0700", dir.display())), "{why}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(cannot_read(&file, &other), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cannot_read(&file, &other).expect("unreadable").starts_with("it cannot read"));
        // the owner's group reads through the group bits
        let meta = std::fs::metadata(&file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(cannot_read(&file, &Ids { uid: 4_000_000, groups: vec![meta.gid()] }), None);
    }
}
