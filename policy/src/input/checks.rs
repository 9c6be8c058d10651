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
