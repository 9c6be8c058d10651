//! The path the application sees. A PHP site behind a front controller
//! (Laravel, Symfony, AtoM) answers `/index.php/glam/browse` with the same
//! page as `/glam/browse`: the framework drops its script's name from the
//! start of the path. Every prefix crawlward matches (browse pages, rate
//! classes, machine doors, deep paths, signed-only paths, metered paths) is
//! matched on the path with that name dropped, so that a client cannot
//! step around a limit by writing it (`site.front_controller`).
//!
//! robots.txt is the one path kept as written: `/index.php/robots.txt` is the
//! application's, not the file nginx serves, and never robots.txt's route.

/// `uri` (nginx's normalized `$uri`) as the application behind the front
/// controller `front_controller` (e.g. `/index.php`) sees it: with the
/// controller's name dropped when a `/` follows it, except for
/// `/robots.txt`. The stock maps do the same with
/// [`front_controller_regex`].
pub fn application_path<'a>(uri: &'a [u8], front_controller: Option<&str>) -> &'a [u8] {
    let Some(fc) = front_controller else { return uri };
    match uri.strip_prefix(fc.as_bytes()) {
        Some(rest) if rest.starts_with(b"/") && rest != b"/robots.txt" => rest,
        _ => uri,
    }
}

/// The PCRE of the stock maps' `$cw_path`: what follows the front controller,
/// as [`application_path`] finds it (the whole path, newlines included, to
/// its very end: `\z`, where `$` would stop before a final newline).
pub fn front_controller_regex(front_controller: &str, capture: &str) -> String {
    format!("(?s)^{}(?<{capture}>/(?!robots\\.txt\\z).*)\\z", regex::escape(front_controller))
}

/// Whether `fc` can be a front controller: an absolute path of a script,
/// without a `/` at its end, a query or characters nginx would have
/// normalized away. The problem in plain words when not.
pub fn front_controller_problem(fc: &str) -> Option<&'static str> {
    if !fc.starts_with('/') || fc.len() < 2 {
        Some("a path that starts with / and names the script, such as /index.php")
    } else if fc.ends_with('/') {
        Some("the script's path without a / at its end (/index.php, not /index.php/)")
    } else if fc.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || matches!(b, b'?' | b'#' | b'%'))
        || fc.contains("//")
        || fc.split('/').any(|s| s == "." || s == "..")
    {
        Some("a normalized path (no space, ?, #, %, // or dot segments): it is compared with nginx's $uri")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FC: Option<&str> = Some("/index.php");

    #[test]
    fn the_front_controllers_name_is_dropped_before_a_slash() {
        assert_eq!(application_path(b"/index.php/glam/browse", FC), b"/glam/browse");
        assert_eq!(application_path(b"/index.php/", FC), b"/");
        assert_eq!(application_path(b"/index.php//x", FC), b"//x");
        assert_eq!(application_path(b"/index.php/glam\n", FC), b"/glam\n");
    }

    #[test]
    fn other_paths_stay_as_written() {
        for p in [&b"/index.php"[..], b"/index.phpx/glam", b"/glam/index.php/browse", b"/INDEX.PHP/glam", b"/index.php/robots.txt", b"/robots.txt"] {
            assert_eq!(application_path(p, FC), p, "{}", String::from_utf8_lossy(p));
        }
        assert_eq!(application_path(b"/index.php/glam", None), b"/index.php/glam");
        // only the exact robots.txt is kept: the application's own paths below it are not
        assert_eq!(application_path(b"/index.php/robots.txt/x", FC), b"/robots.txt/x");
        assert_eq!(application_path(b"/index.php/robots.txt\n", FC), b"/robots.txt\n");
    }

    #[test]
    fn a_front_controller_is_a_normalized_script_path() {
        assert_eq!(front_controller_problem("/index.php"), None);
        assert_eq!(front_controller_problem("/app/index.php"), None);
        for bad in ["index.php", "/", "/index.php/", "/in dex.php", "/index.php?x", "/a//index.php", "/a/../index.php", "/index%2ephp"] {
            assert!(front_controller_problem(bad).is_some(), "{bad}");
        }
    }
}
