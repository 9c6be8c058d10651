//! Typed nginx configuration fragments. Quoting and escaping live here, so
//! templates only lay the blocks out.

use std::fmt::{self, Write};

/// A string as an nginx configuration token: quoted when it has to be.
/// nginx's parser turns `\\` into `\`, and `\t` and `\n` into a tab and a
/// newline, so every backslash is doubled and a tab or a newline (the
/// separators the stock render's own values use) written as its escape.
/// Values reaching here are validated: no quotes and no other control characters.
pub fn quote(s: &str) -> String {
    debug_assert!(!s.contains(['"', '\'']), "unvalidated value reached the renderer: {s:?}");
    let plain = !s.is_empty() && !s.starts_with('~') && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:,@+=%$".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n"))
    }
}

/// A map source value: the words `map` treats as its own parameters are escaped.
fn map_key(s: &str) -> String {
    match s {
        "default" | "hostnames" | "include" | "volatile" => format!("\\{s}"),
        _ => quote(s),
    }
}

/// One `map` block.
pub struct Map {
    pub comment: String,
    pub source: String,
    pub variable: String,
    pub default: String,
    /// (key, value); a key starting with `~` or `~*` is a regular expression.
    pub entries: Vec<(String, String)>,
}

impl Map {
    pub fn new(comment: &str, source: &str, variable: &str, default: &str) -> Map {
        Map { comment: comment.into(), source: source.into(), variable: variable.into(), default: default.into(), entries: Vec::new() }
    }

    pub fn entry(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Map {
        self.entries.push((key.into(), value.into()));
        self
    }

    /// A case-insensitive regular expression key.
    pub fn regex_ci(&mut self, pattern: &str, value: impl Into<String>) -> &mut Map {
        self.entry(format!("~*{pattern}"), value)
    }

    /// A case-sensitive regular expression key.
    pub fn regex(&mut self, pattern: &str, value: impl Into<String>) -> &mut Map {
        self.entry(format!("~{pattern}"), value)
    }
}

fn map_value(v: &str) -> String {
    if v.is_empty() {
        "\"\"".into()
    } else {
        quote(v)
    }
}

impl fmt::Display for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.comment.lines() {
            writeln!(f, "# {line}")?;
        }
        writeln!(f, "map {} {} {{", quote(&self.source), self.variable)?;
        writeln!(f, "    default {};", map_value(&self.default))?;
        let width = self.entries.iter().map(|(k, _)| map_key(k).len()).filter(|w| *w <= 40).max().unwrap_or(0);
        for (k, v) in &self.entries {
            let key = if k.is_empty() { "\"\"".to_string() } else { map_key(k) };
            writeln!(f, "    {key:width$} {};", map_value(v))?;
        }
        write!(f, "}}")
    }
}

/// One `geo` block.
pub struct Geo {
    pub comment: String,
    pub variable: String,
    pub default: String,
    pub entries: Vec<(String, String)>,
}

impl fmt::Display for Geo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.comment.lines() {
            writeln!(f, "# {line}")?;
        }
        writeln!(f, "geo {} {{", self.variable)?;
        writeln!(f, "    default {};", map_value(&self.default))?;
        for (net, v) in &self.entries {
            writeln!(f, "    {net} {};", map_value(v))?;
        }
        write!(f, "}}")
    }
}

/// Simple directives, one per line, with an optional comment above them.
#[derive(Default)]
pub struct Directives {
    pub text: String,
}

impl Directives {
    pub fn comment(&mut self, c: &str) -> &mut Self {
        for line in c.lines() {
            let _ = writeln!(self.text, "# {line}");
        }
        self
    }

    pub fn line(&mut self, d: impl AsRef<str>) -> &mut Self {
        let _ = writeln!(self.text, "{};", d.as_ref());
        self
    }

    /// A block such as `if (...) { ... }` or `location = /x { ... }`, with its body's directives.
    pub fn block(&mut self, head: &str, body: &[String]) -> &mut Self {
        let _ = writeln!(self.text, "{head} {{");
        for d in body {
            let _ = writeln!(self.text, "    {d};");
        }
        let _ = writeln!(self.text, "}}");
        self
    }
}

impl Directives {
    /// A block whose body is other directives, blocks among them, indented.
    pub fn nest(&mut self, head: &str, inner: &Directives) -> &mut Self {
        let _ = writeln!(self.text, "{head} {{");
        for l in inner.text.lines() {
            if l.is_empty() {
                let _ = writeln!(self.text);
            } else {
                let _ = writeln!(self.text, "    {l}");
            }
        }
        let _ = writeln!(self.text, "}}");
        self
    }
}

impl fmt::Display for Directives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("GPTBot"), "GPTBot");
        assert_eq!(quote("~*GPTBot"), "\"~*GPTBot\"");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("x{3}"), "\"x{3}\"");
        assert_eq!(quote("~*a\\.b\\t"), "\"~*a\\\\.b\\\\t\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(map_key("default"), "\\default");
    }

    #[test]
    fn map_layout() {
        let mut m = Map::new("who", "$http_user_agent", "$a", "");
        m.regex_ci("GPTBot", "GPTBot").entry("", "x").entry("default", "d");
        assert_eq!(m.to_string(), "# who\nmap $http_user_agent $a {\n    default \"\";\n    \"~*GPTBot\" GPTBot;\n    \"\"         x;\n    \\default   d;\n}");
    }
}
