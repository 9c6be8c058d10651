//! Policy errors: every problem found, each with the file, line, column and
//! the path to the value, printed with an excerpt of the source.

use crate::positions::{Position, Positions};
use std::fmt;

/// One problem, located by its path in the document (`site.trusted_proxies[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

/// A problem placed in the source file.
#[derive(Debug, Clone)]
pub struct Located {
    pub path: String,
    pub message: String,
    pub position: Option<Position>,
    /// The source line at `position`, for the excerpt.
    pub line_text: Option<String>,
}

/// Everything wrong with one policy file. Nothing is rendered while one exists.
#[derive(Debug, Clone)]
pub struct PolicyError {
    pub file: String,
    pub problems: Vec<Located>,
}

impl PolicyError {
    pub(crate) fn locate(file: &str, source: &str, problems: Vec<Problem>) -> PolicyError {
        let index = Positions::index(source);
        let problems = problems
            .into_iter()
            .map(|p| {
                let position = index.find(&p.path);
                Located { line_text: position.and_then(|pos| line_of(source, pos.line)), position, path: p.path, message: p.message }
            })
            .collect();
        PolicyError { file: file.to_string(), problems }
    }

    /// A syntax or type error from the YAML parser, which knows its own position.
    pub(crate) fn syntax(file: &str, source: &str, err: &serde_yaml::Error) -> PolicyError {
        let position = err.location().map(|l| within(source, Position { line: l.line(), column: l.column() }));
        // serde_yaml appends " at line L column C" to its message; the position is printed apart.
        let text = err.to_string();
        let message = match text.rfind(" at line ") {
            Some(cut) if position.is_some() => text[..cut].to_string(),
            _ => text,
        };
        let (path, message) = match message.split_once(": ") {
            Some((p, m)) if looks_like_path(p) => (p.to_string(), m.to_string()),
            _ => (String::new(), message),
        };
        let message = in_plain_words(&message);
        PolicyError {
            file: file.to_string(),
            problems: vec![Located { line_text: position.and_then(|pos| line_of(source, pos.line)), position, path, message }],
        }
    }
}

/// The parser reports an error found at the end of the text (a missing
/// field of an empty or comment-only file) on the line after the last one
/// when the text does not end with a line break: a position no editor can
/// open. Such a position is moved to the end of the last line.
fn within(source: &str, pos: Position) -> Position {
    // YAML breaks lines at LF, CR LF and CR
    let breaks = source.replace("\r\n", "\n").matches(['\n', '\r']).count();
    if pos.line <= breaks + 1 {
        return pos;
    }
    let last = source.rsplit(['\n', '\r']).next().unwrap_or("");
    Position { line: breaks + 1, column: last.chars().count() + 1 }
}

/// A parser's message (serde's) in the policy's words: no type names of
/// ours (`expected struct PolicyFile`), and no value quoted at length (a log
/// given for a policy is one long string, and the parser quotes it whole).
/// For every file crawlward reads, not only the policy.
pub fn in_plain_words(message: &str) -> String {
    // the YAML scanner's words for a layout mistake, with what to look at
    const LAYOUT: [(&str, &str); 6] = [
        (
            "mapping values are not allowed in this context",
            "a `key: value` where none can be: indent this line as the keys beside it (YAML nests by indentation), or quote a value that holds \": \"",
        ),
        ("did not find expected key", "this line is indented where no key was expected: indent it as the keys beside it (YAML nests by indentation)"),
        (
            "found character that cannot start any token",
            "a character no YAML value starts with: a tab (YAML indents with spaces only), or an unquoted value starting with @ or `",
        ),
        ("did not find expected ',' or ']'", "a list opened with `[` is not closed with `]`, or an item holding `,`, `[` or `]` is not quoted"),
        ("did not find expected ',' or '}'", "a mapping opened with `{` is not closed with `}`, or a value holding `,`, `{` or `}` is not quoted"),
        ("found unexpected end of stream", "the file ends inside a quoted value: a quote is not closed"),
    ];
    if let Some((_, plain)) = LAYOUT.iter().find(|(parser, _)| message.starts_with(parser)) {
        return (*plain).to_string();
    }
    if let Some(kind) = message.strip_prefix("invalid type: ").and_then(|m| m.strip_suffix(", expected struct PolicyFile")) {
        let kind = kind.split([' ', '`', '"']).next().unwrap_or(kind);
        let what = match kind {
            "string" => "plain text (to analyze an access log, give it after the policy, or alone: `crawlward analyze access.log`)".to_string(),
            "sequence" => "a list".to_string(),
            "unit" => "empty".to_string(),
            other => format!("a {other}"),
        };
        return format!("this is not a policy: a policy is a mapping of sections such as `site:` and `robots:`, and this file is {what}");
    }
    // Rust's names of number types, in words
    const NUMBERS: [(&str, &str); 10] = [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u32", "expected a whole number from 0 to 4294967295"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a tuple of size 2", "expected a pair, such as [name, 12]"),
    ];
    let mut message = message.to_string();
    for (rust, words) in NUMBERS {
        if let Some(at) = message.find(rust) {
            // the whole word only: `expected u32` is not `expected u32x`
            let end = at + rust.len();
            if !message[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                message.replace_range(at..end, words);
            }
        }
    }
    let message = message.as_str();
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find("expected struct ") {
        out.push_str(&rest[..at]);
        out.push_str("expected a mapping of settings");
        rest = rest[at + "expected struct ".len()..].trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    }
    out.push_str(rest);
    cut_quotes(&out)
}

/// The longest quoted value a message keeps, in characters.
const QUOTE_MAX: usize = 60;

/// `message` with each quoted value (`"..."` or `` `...` ``) longer than
/// [`QUOTE_MAX`] characters cut to that length, followed by `...`.
fn cut_quotes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * QUOTE_MAX));
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '"' || c == '`' {
            let mut kept = 0;
            let mut escaped = false;
            for d in chars.by_ref() {
                let closes = d == c && !escaped;
                escaped = d == '\\' && !escaped;
                if closes {
                    if kept > QUOTE_MAX {
                        out.push_str("...");
                    }
                    out.push(d);
                    break;
                }
                kept += 1;
                if kept <= QUOTE_MAX {
                    out.push(d);
                }
            }
        }
    }
    out
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && !s.contains(' ') && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c))
}

/// The line shown under a problem, cut after [`LINE_MAX`] characters.
fn line_of(source: &str, line: usize) -> Option<String> {
    let text = source.lines().nth(line.checked_sub(1)?)?;
    Some(match text.char_indices().nth(LINE_MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    })
}

/// The longest line a problem shows, in characters.
const LINE_MAX: usize = 200;

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "error: {}", p.message)?;
            let at = match p.position {
                Some(pos) => format!("{}:{}:{}", self.file, pos.line, pos.column),
                None => self.file.clone(),
            };
            if p.path.is_empty() {
                writeln!(f, "  --> {at}")?;
            } else {
                writeln!(f, "  --> {at} (at {})", p.path)?;
            }
            if let (Some(pos), Some(text)) = (p.position, &p.line_text) {
                let num = pos.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {text}")?;
                writeln!(f, "{pad} | {}^", " ".repeat(pos.column.saturating_sub(1)))?;
            }
        }
        let n = self.problems.len();
        write!(f, "{} problem{} in {}; nothing was written", n, if n == 1 { "" } else { "s" }, self.file)
    }
}

impl std::error::Error for PolicyError {}

#[cfg(test)]
mod tests {
    /// An access log given for a policy: one long string to the parser,
    /// which quoted it whole (12 MB on the terminal for a 62,000-line log).
    #[test]
    fn a_log_for_a_policy_is_told_in_a_sentence_not_echoed() {
        let line = "203.0.113.9 - - [04/Dec/2026:10:00:00 +0000] \"GET /record/1 HTTP/1.1\" 200 512 \"-\" \"Mozilla/5.0 (compatible; GPTBot/1.2)\"\n";
        let log = line.repeat(3000);
        let e = crate::load_str("access.log", &log).unwrap_err().to_string();
        assert!(e.len() < 1000, "{} bytes: {}", e.len(), &e[..e.len().min(300)]);
        assert!(e.contains("this is not a policy") && e.contains("crawlward analyze access.log"), "{e}");
        assert!(!e.contains("PolicyFile"), "{e}");
    }

    #[test]
    fn number_types_become_words() {
        let e = crate::load_str("p.yaml", "site: {canonical_url: https://example.org, upstream_workers: -1}\nrobots: {}\n").unwrap_err();
        assert_eq!(e.problems[0].message, "invalid type: integer `-1`, expected a whole number from 0 to 4294967295", "{e}");
        let e = crate::load_str("p.yaml", "site: {canonical_url: https://example.org, upstream_workers: 4}\nrobots: {}\nblock_status: \"444\"\n").unwrap_err();
        assert_eq!(e.problems[0].message, "invalid type: string \"444\", expected a whole number from 0 to 65535", "{e}");
    }

    #[test]
    fn type_names_become_words_and_long_values_are_cut() {
        let e = crate::load_str("p.yaml", "- a\n- b\n").unwrap_err().to_string();
        assert!(e.contains("this is not a policy") && e.contains("is a list"), "{e}");
        let e = crate::load_str("p.yaml", "site:\n  - a\nrobots: {}\n").unwrap_err().to_string();
        assert!(e.contains("invalid type: sequence, expected a mapping of settings") && !e.contains("struct"), "{e}");
        let long = "x".repeat(500);
        let e = crate::load_str("p.yaml", &format!("site: {{canonical_url: https://example.org, upstream_workers: \"{long}\"}}\nrobots: {{}}\n")).unwrap_err();
        let message = &e.problems[0].message;
        assert!(message.contains(&format!("\"{}...\"", "x".repeat(60))) && message.len() < 200, "{message}");
        assert!(e.problems[0].line_text.as_deref().is_some_and(|t| t.ends_with("...") && t.chars().count() == 203), "{e}");
    }

    /// What a newcomer's first policy gets wrong: the layout. Each message
    /// says what to look at, in YAML's terms, not the scanner's.
    #[test]
    fn layout_mistakes_say_what_to_look_at() {
        let head = "site:\n  canonical_url: https://example.org\n  upstream_workers: 4\n";
        for (text, says, at) in [
            ("site:\n  canonical_url: https://example.org\n   upstream_workers: 4\nrobots: {}\n", "indent this line as the keys beside it", (3, 20)),
            (&format!("{head} robots: {{}}\n") as &str, "this line is indented where no key was expected", (4, 2)),
            ("site:\n\tcanonical_url: https://example.org\nrobots: {}\n", "a tab (YAML indents with spaces only)", (2, 1)),
            (&format!("{head}robots: {{disallow: [/a}}\n"), "a list opened with `[` is not closed with `]`", (4, 23)),
            (&format!("{head}robots: {{disallow: [/a]\n"), "a mapping opened with `{` is not closed with `}`", (5, 1)),
            ("site:\n  canonical_url: \"https://example.org\n  upstream_workers: 4\nrobots: {}\n", "a quote is not closed", (5, 1)),
        ] {
            let e = crate::load_str("p.yaml", text).unwrap_err();
            let p = &e.problems[0];
            assert!(p.message.contains(says), "{text:?}: {e}");
            assert!(!p.message.contains("while parsing") && !p.message.contains(" at line "), "{e}");
            let pos = p.position.expect("a position");
            assert_eq!((pos.line, pos.column), at, "{text:?}: {e}");
        }
    }

    /// Found by the policy fuzz target: a comment-only policy without a final
    /// line break was refused at line 2 of a one-line file.
    #[test]
    fn an_error_at_the_end_of_the_text_points_at_its_last_line() {
        let source = "# expect: 7:12 actions.# ex";
        let e = crate::load_str("p.yaml", source).unwrap_err();
        let pos = e.problems[0].position.expect("a position");
        assert_eq!((pos.line, pos.column), (1, 28), "{e}");
        assert_eq!(e.problems[0].line_text.as_deref(), Some(source));
        assert!(e.to_string().contains("p.yaml:1:28"), "{e}");
        // with the line break, the parser's own position (the empty line after it) is kept
        let e = crate::load_str("p.yaml", "# a comment\n").unwrap_err();
        let pos = e.problems[0].position.expect("a position");
        assert_eq!((pos.line, pos.column), (2, 1), "{e}");
    }
}
