//! Client-written bytes in a log line, escaped as nginx escapes its access
//! log: `"`, `\`, control bytes and every byte outside printable ASCII
//! become `\xHH`, so a User-Agent cannot close a quoted field, forge the
//! fields after it or start a new line.

use std::fmt;

/// Displays the bytes escaped; writes them in runs, allocates nothing.
#[derive(Clone, Copy)]
pub struct Escaped<'a>(pub &'a [u8]);

fn plain(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while !rest.is_empty() {
            let run = rest.iter().position(|b| !plain(*b)).unwrap_or(rest.len());
            // a run of printable ASCII is valid UTF-8
            f.write_str(std::str::from_utf8(&rest[..run]).unwrap_or_default())?;
            if let Some(b) = rest.get(run) {
                write!(f, "\\x{b:02X}")?;
            }
            rest = &rest[(run + 1).min(rest.len())..];
        }
        Ok(())
    }
}

/// `bytes`, escaped for a log line.
pub fn escaped(bytes: &[u8]) -> Escaped<'_> {
    Escaped(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_could_forge_a_field() {
        let cases: [(&[u8], &str); 7] = [
            (b"Rivetbot", "Rivetbot"),
            (b"Evil\"bot", "Evil\\x22bot"),
            (b"a\\b", "a\\x5Cb"),
            (b"line\nbreak\r\t\0", "line\\x0Abreak\\x0D\\x09\\x00"),
            ("bøt".as_bytes(), "b\\xC3\\xB8t"),
            (b"\x7f\xff", "\\x7F\\xFF"),
            (b"", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(escaped(raw).to_string(), want);
        }
    }

    #[test]
    fn keeps_printable_ascii() {
        let all: Vec<u8> = (0x20..0x7f).filter(|b| *b != b'"' && *b != b'\\').collect();
        assert_eq!(escaped(&all).to_string().as_bytes(), &all[..]);
    }
}

/// A query argument's bytes decoded: `%HH` as the byte (a `%` not followed by
/// two hex digits kept as it is) and `+` as a space, as forms encode them.
pub fn percent_decoded(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod percent_tests {
    #[test]
    fn percent_decoding_as_forms_encode() {
        assert_eq!(super::percent_decoded(b"Mozilla%2F5.0+(X11)%zz%4"), b"Mozilla/5.0 (X11)%zz%4");
    }
}
