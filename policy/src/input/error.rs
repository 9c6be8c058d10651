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

fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && !s.contains(' ') && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c))
}

fn line_of(source: &str, line: usize) -> Option<String> {
    source.lines().nth(line.checked_sub(1)?).map(str::to_string)
}

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
