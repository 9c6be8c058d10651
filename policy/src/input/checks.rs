//! The small checks every part of the policy's validation shares: a
//! problem recorded with its path, a URL path prefix, an action's name, a
//! rate class's name.

use crate::{Action, Problem};

/// Records a problem at `path` of the policy.
pub(crate) fn problem(problems: &mut Vec<Problem>, path: impl Into<String>, message: impl Into<String>) {
    problems.push(Problem { path: path.into(), message: message.into() });
}

/// A URL path prefix: starts with '/', only characters that need no quoting in nginx and no regex escaping trouble.
pub(crate) fn check_path(p: &str, path: &str, problems: &mut Vec<Problem>) -> bool {
    let ok = p.starts_with('/') && p.chars().all(|c| c.is_ascii_alphanumeric() || "/._~%-+@:,=".contains(c));
    if !ok {
        problem(problems, path, format!("invalid path \"{p}\": expected a path starting with '/' (letters, digits and / . _ ~ % - + @ : , =)"));
    }
    ok
}

/// An action as the policy writes it (`block` with the policy's status).
pub(crate) fn parse_action(v: &str, block_status: u16) -> Option<Action> {
    Some(match v {
        "allow" => Action::Allow,
        "block" => Action::Block(block_status),
        "block-403" => Action::Block(403),
        "block-444" => Action::Block(444),
        "throttle" => Action::Throttle,
        _ => return None,
    })
}

/// A rate class's name: it becomes part of nginx variable and zone names.
pub(crate) fn valid_class_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A zone size in KiB: `512k`, `10m`.
pub(crate) fn zone_kib(zone_size: &str) -> Option<u64> {
    let n = zone_size.strip_suffix('k').or_else(|| zone_size.strip_suffix('m'))?.parse::<u64>().ok()?;
    Some(if zone_size.ends_with('m') { n * 1024 } else { n })
}

/// A shared zone size nginx accepts: `512k`, `10m`, at least 32k (8 pages).
pub(crate) fn check_zone_size(zone_size: &str, path: &str, problems: &mut Vec<Problem>) {
    match zone_kib(zone_size) {
        None => problem(problems, path, format!("invalid zone size \"{zone_size}\": expected e.g. 10m or 512k")),
        Some(k) if k < 32 => problem(problems, path, format!("zone size \"{zone_size}\" is too small: nginx needs at least 32k")),
        Some(_) => {}
    }
}
