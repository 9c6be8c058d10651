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
/// `/robots.txt`. The stock maps' prefixes do the same with
/// [`front_controller_group`].
pub fn application_path<'a>(uri: &'a [u8], front_controller: Option<&str>) -> &'a [u8] {
    let Some(fc) = front_controller else { return uri };
    match uri.strip_prefix(fc.as_bytes()) {
        Some(rest) if rest.starts_with(b"/") && rest != b"/robots.txt" => rest,
        _ => uri,
    }
}

/// What the stock maps' prefix expressions allow before a prefix: the front
/// controller's name, as an optional group without a capture (so that a map
/// evaluated in a regex location leaves its `$1` alone), unless robots.txt
/// follows it (`\z`: `$` would also stop before a final newline). A prefix
/// then matches the path [`application_path`] gives, and also the path as
/// written, which differ only for prefixes validation refuses
/// ([`prefix_problem`]).
pub fn front_controller_group(front_controller: &str) -> String {
    format!("(?:{}(?!/robots\\.txt\\z))?", regex::escape(front_controller))
}

/// Why a path prefix of the policy cannot be matched behind the front
/// controller `fc`: written behind its name (it would never match, the name
/// being dropped first), or covering the name itself (it would match the
/// controller's own paths only as written, `/index.php` alone, and no longer
/// what the application sees behind it).
pub fn prefix_problem(prefix: &str, fc: &str) -> Option<String> {
    if let Some(rest) = prefix.strip_prefix(fc).filter(|r| r.starts_with('/')) {
        Some(format!(
            "\"{prefix}\" starts with the front controller {fc}, which is dropped from every path before it is matched: write the application's path, {rest}"
        ))
    } else if prefix != "/" && fc.starts_with(prefix) {
        Some(format!(
            "\"{prefix}\" covers the front controller {fc}, whose name is dropped from every path before it is matched: write the application's paths it is meant for"
        ))
    } else {
        None
    }
}

/// Whether `fc` can be a front controller: an absolute path of a script,
/// without a `/` at its end, a query or characters nginx would have
/// normalized away. The problem in plain words when not.
pub fn front_controller_problem(fc: &str) -> Option<&'static str> {
    if !fc.starts_with('/') || fc.len() < 2 {
        Some("a path that starts with / and names the script, such as /index.php")
    } else if fc.ends_with('/') {
        Some("the script's path without a / at its end (/index.php, not /index.php/)")
    } else if fc.bytes().any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~')))
        || fc.contains("//")
        || fc.split('/').any(|s| s == "." || s == "..")
    {
        Some("a normalized path of letters, digits, '/', '.', '_', '-' and '~' (no //, no dot segments): it is compared with nginx's $uri")
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
    fn a_prefix_behind_or_over_the_front_controller_is_refused() {
        let fc = "/index.php";
        assert!(prefix_problem("/index.php/oai", fc).unwrap().contains("write the application's path, /oai"));
        assert!(prefix_problem("/index.php", fc).unwrap().contains("covers the front controller"));
        assert!(prefix_problem("/index", fc).is_some());
        for fine in ["/", "/oai", "/index.phpx", "/index.php.bak", "/glam/index.php/x"] {
            assert_eq!(prefix_problem(fine, fc), None, "{fine}");
        }
    }

    #[test]
    fn a_front_controller_is_a_normalized_script_path() {
        assert_eq!(front_controller_problem("/index.php"), None);
        assert_eq!(front_controller_problem("/app/index.php"), None);
        for bad in [
            "index.php",
            "/",
            "/index.php/",
            "/in dex.php",
            "/index.php?x",
            "/a//index.php",
            "/a/../index.php",
            "/index%2ephp",
            "/a\"b.php",
            "/a'b.php",
            "/a;b.php",
            "/a$b.php",
        ] {
            assert!(front_controller_problem(bad).is_some(), "{bad}");
        }
    }
}
