//! The logs: plain or gzip files, several in a row, or standard input, read
//! in blocks and cut into lines without holding more than one block and the
//! longest line allowed, however large the log.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// A line longer than this is not held: it is counted as unparseable and
/// skipped up to its end.
pub const MAX_LINE: usize = 64 * 1024;
const BLOCK: usize = 1 << 20;

/// Open a log (`-` is standard input); gzip is recognised by its magic bytes,
/// whatever the name, and concatenated gzip members (logrotate's, `cat a.gz
/// b.gz`) are read in turn.
pub fn open(path: &str) -> io::Result<Box<dyn Read>> {
    let raw: Box<dyn Read> = if path == "-" { Box::new(io::stdin().lock()) } else { Box::new(File::open(Path::new(path))?) };
    let mut r = BufReader::with_capacity(1 << 16, raw);
    let head = io::BufRead::fill_buf(&mut r)?;
    if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(r)))
    } else {
        Ok(Box::new(r))
    }
}

/// Whether the file at `path` is an access log rather than a policy: its
/// first line (of the first 64 KiB, gzip or plain) reads as a line of one of
/// the log formats analyze reads. A policy's first line never does: a log
/// line starts with an address and a space.
pub fn looks_like_log(path: &Path) -> bool {
    let Some(path) = path.to_str() else { return false };
    if path == "-" {
        return true;
    }
    let Ok(r) = open(path) else { return false };
    let mut head = Vec::new();
    if r.take(MAX_LINE as u64).read_to_end(&mut head).is_err() {
        return false;
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    super::parse::Parser::default().parse(line).is_ok()
}

/// What a line handler is given.
pub enum Piece<'a> {
    /// A whole line, without its `\n` (and `\r`).
    Line(&'a [u8]),
    /// The first [`MAX_LINE`] bytes of a line that was longer.
    TooLong(&'a [u8]),
}

/// Call `f` on every line of `r`, in order. A last line without `\n` counts.
pub fn lines(r: &mut dyn Read, mut f: impl FnMut(Piece<'_>)) -> io::Result<()> {
    let mut buf = vec![0u8; BLOCK + MAX_LINE];
    // bytes [0, filled) hold data; [0, start) is already handed out
    let mut filled = 0;
    let mut skipping = false;
    loop {
        let n = match r.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let eof = n == 0;
        filled += n;
        let mut start = 0;
        while let Some(at) = memchr::memchr(b'\n', &buf[start..filled]) {
            let end = start + at;
            if skipping {
                skipping = false;
            } else {
                let mut line = &buf[start..end];
                if let [rest @ .., b'\r'] = line {
                    line = rest;
                }
                f(Piece::Line(line));
            }
            start = end + 1;
        }
        if eof {
            if start < filled && !skipping {
                f(Piece::Line(&buf[start..filled]));
            }
            return Ok(());
        }
        // the rest is the start of a line: keep it (at most MAX_LINE bytes, so a
        // block's worth of room remains for the next read), unless it is too long
        let rest = filled - start;
        if skipping {
            filled = 0;
        } else if rest > MAX_LINE {
            f(Piece::TooLong(&buf[start..start + MAX_LINE]));
            skipping = true;
            filled = 0;
        } else {
            buf.copy_within(start..filled, 0);
            filled = rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(data: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        lines(&mut &data[..], |p| match p {
            Piece::Line(l) => out.push(String::from_utf8_lossy(l).into_owned()),
            Piece::TooLong(l) => out.push(format!("TOO LONG {}", l.len())),
        })
        .unwrap();
        out
    }

    #[test]
    fn lines_with_crlf_a_last_line_and_an_over_long_one() {
        assert_eq!(collect(b"a\nb\r\n\nc"), ["a", "b", "", "c"]);
        let mut big = b"x\n".to_vec();
        big.extend(std::iter::repeat_n(b'y', 3 * BLOCK));
        big.extend(b"\nz\n");
        assert_eq!(collect(&big), ["x".to_string(), format!("TOO LONG {MAX_LINE}"), "z".to_string()]);
        assert_eq!(collect(b""), Vec::<String>::new());
    }

    #[test]
    fn gzip_members_in_a_row() {
        use std::io::Write;
        let gz = |s: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(s).unwrap();
            e.finish().unwrap()
        };
        let mut both = gz(b"one\ntwo\n");
        both.extend(gz(b"three\n"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log.2");
        std::fs::write(&path, &both).unwrap();
        let mut r = open(path.to_str().unwrap()).unwrap();
        let mut out = Vec::new();
        lines(&mut r, |p| {
            if let Piece::Line(l) = p {
                out.push(String::from_utf8_lossy(l).into_owned())
            }
        })
        .unwrap();
        assert_eq!(out, ["one", "two", "three"]);
    }
}
