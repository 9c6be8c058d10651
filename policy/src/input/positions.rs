//! Where each value of a YAML document stands (line and column), by path.
//!
//! serde_yaml reports positions for syntax and type errors only. Semantic
//! errors (a bad CIDR, a duplicate agent) are found after deserializing, so a
//! second pass over the parser's events records the position of every value
//! under its path (`catalogue.agents[2].ranges[0]`), and validation looks the
//! path up when it reports a problem.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A position in the source, both 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// Path -> position of the value (for mappings and sequences, where they start).
#[derive(Debug, Default)]
pub struct Positions {
    by_path: HashMap<String, Position>,
}

impl Positions {
    /// Index a document. A document that does not parse yields an empty index:
    /// serde_yaml reports the syntax error itself, with its position.
    pub fn index(source: &str) -> Positions {
        let mut walker = Walker { stack: Vec::new(), out: HashMap::new() };
        let mut parser = Parser::new_from_str(source);
        if parser.load(&mut walker, false).is_err() {
            return Positions::default();
        }
        Positions { by_path: walker.out }
    }

    /// The position of `path`, or of its nearest indexed ancestor.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut p = path;
        loop {
            if let Some(pos) = self.by_path.get(p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

enum Frame {
    /// In a mapping: the path of the mapping, and the key just read (None: next scalar is a key).
    Map { path: String, key: Option<String> },
    /// In a sequence: the path of the sequence and the index of the next item.
    Seq { path: String, next: usize },
}

struct Walker {
    stack: Vec<Frame>,
    out: HashMap<String, Position>,
}

impl Walker {
    /// The path of the value that starts now, or None when the event is a mapping key.
    fn value_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Map { path, key }) => key.take().map(|k| join(path, &k)),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some(p)
            }
        }
    }

    fn record(&mut self, path: &str, mark: Marker) {
        let pos = Position { line: mark.line(), column: mark.col() + 1 };
        self.out.entry(path.to_string()).or_insert(pos);
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(value, ..) => match self.value_path() {
                Some(path) => self.record(&path, mark),
                None => {
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some(value);
                    }
                }
            },
            Event::Alias(_) => {
                self.value_path();
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = self.value_path().unwrap_or_default();
                self.record(&path, mark);
                self.stack.push(match ev {
                    Event::MappingStart(..) => Frame::Map { path, key: None },
                    _ => Frame::Seq { path, next: 0 },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_nested_values() {
        let src = "site:\n  name: x\n  list:\n    - a\n    - b: 1\n      c: [2, 3]\n";
        let p = Positions::index(src);
        assert_eq!(p.find("site.name"), Some(Position { line: 2, column: 9 }));
        assert_eq!(p.find("site.list[0]"), Some(Position { line: 4, column: 7 }));
        assert_eq!(p.find("site.list[1].b"), Some(Position { line: 5, column: 10 }));
        assert_eq!(p.find("site.list[1].c[1]"), Some(Position { line: 6, column: 14 }));
        // an unknown leaf falls back to its parent
        assert_eq!(p.find("site.list[1].zzz").map(|p| p.line), Some(5));
    }
}
