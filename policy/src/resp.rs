//! The small part of the Redis protocol (RESP2) that budget sync speaks to
//! Valkey or Redis: commands encoded as arrays of bulk strings, pipelined into
//! one buffer, and an incremental parser of the replies as they arrive in
//! pieces from a non-blocking socket.
//!
//! Why our own: the module's connection runs on nginx's event loop (a worker
//! never waits on the network), and the Redis client crates bring their own
//! runtime (tokio, async-std) or block in `read`. What is needed here is
//! about a hundred lines: no allocation per reply beyond the reply itself,
//! every length bounded, nothing that a hostile or broken store sends can
//! make the parser grow without bound or panic.

/// Longest bulk string accepted from the store (our replies are integers and
/// short strings): a store that sends more is treated as broken.
pub const MAX_BULK: usize = 64 * 1024;
/// Most elements in one array reply.
pub const MAX_ARRAY: usize = 1024;
/// Deepest nesting of arrays.
const MAX_DEPTH: usize = 4;
/// Longest line (status, error, integer, length).
const MAX_LINE: usize = 1024;

/// Append one command, `args` as bulk strings, to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_number(out, args.len() as u64);
    for a in args {
        out.push(b'$');
        push_number(out, a.len() as u64);
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_number(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Status(Vec<u8>),
    /// `-ERR ...`: the store refused the command.
    Error(Vec<u8>),
    /// `:42`
    Integer(i64),
    /// `$3 abc`, or None for `$-1` (a key that does not exist).
    Bulk(Option<Vec<u8>>),
    /// `*2 ...`, or None for `*-1`.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as a count: an integer, or a bulk string of digits (GET of an
    /// INCRBY counter); a missing key is 0. None for anything else.
    pub fn count(&self) -> Option<i64> {
        match self {
            Reply::Integer(n) => Some(*n),
            Reply::Bulk(None) => Some(0),
            Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }
}

/// The store broke the protocol: the connection cannot be trusted any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Replies parsed from bytes fed in any pieces.
#[derive(Debug, Default)]
pub struct Parser {
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed into replies handed out.
    done: usize,
}

impl Parser {
    /// Add bytes read from the connection.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.done > 0 && self.done == self.buf.len() {
            self.buf.clear();
            self.done = 0;
        } else if self.done > 4096 {
            self.buf.drain(..self.done);
            self.done = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes fed but not yet parsed into a reply.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.done
    }

    /// The next whole reply, None if more bytes are needed.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ProtocolError> {
        match parse(&self.buf[self.done..], 0)? {
            Some((reply, used)) => {
                self.done += used;
                Ok(Some(reply))
            }
            None if self.buffered() > MAX_BULK + MAX_ARRAY * MAX_LINE => Err(ProtocolError("reply too long")),
            None => Ok(None),
        }
    }

    /// Forget everything fed (a new connection).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.done = 0;
    }
}

/// A line ending in CRLF at the start of `b`: its contents and the bytes it takes.
fn line(b: &[u8]) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    match b.iter().take(MAX_LINE + 2).position(|c| *c == b'\n') {
        Some(0) => Err(ProtocolError("line without CR")),
        Some(i) if b[i - 1] == b'\r' => Ok(Some((&b[..i - 1], i + 1))),
        Some(_) => Err(ProtocolError("line without CR")),
        None if b.len() > MAX_LINE + 2 => Err(ProtocolError("line too long")),
        None => Ok(None),
    }
}

fn number(s: &[u8]) -> Result<i64, ProtocolError> {
    let bad = ProtocolError("bad number");
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad);
    }
    let n: i64 = std::str::from_utf8(digits).map_err(|_| bad.clone())?.parse().map_err(|_| bad)?;
    Ok(if neg { -n } else { n })
}

/// One reply at the start of `b` and the bytes it takes, None if incomplete.
fn parse(b: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(kind) = b.first() else { return Ok(None) };
    let Some((text, head)) = line(&b[1..])? else { return Ok(None) };
    let head = head + 1;
    match kind {
        b'+' => Ok(Some((Reply::Status(text.to_vec()), head))),
        b'-' => Ok(Some((Reply::Error(text.to_vec()), head))),
        b':' => Ok(Some((Reply::Integer(number(text)?), head))),
        b'$' => {
            let n = number(text)?;
            if n == -1 {
                return Ok(Some((Reply::Bulk(None), head)));
            }
            let n = usize::try_from(n).map_err(|_| ProtocolError("bad bulk length"))?;
            if n > MAX_BULK {
                return Err(ProtocolError("bulk string too long"));
            }
            if b.len() < head + n + 2 {
                return Ok(None);
            }
            if &b[head + n..head + n + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string without CRLF"));
            }
            Ok(Some((Reply::Bulk(Some(b[head..head + n].to_vec())), head + n + 2)))
        }
        b'*' => {
            let n = number(text)?;
            if n == -1 {
                return Ok(Some((Reply::Array(None), head)));
            }
            let n = usize::try_from(n).map_err(|_| ProtocolError("bad array length"))?;
            if n > MAX_ARRAY {
                return Err(ProtocolError("array too long"));
            }
            if depth >= MAX_DEPTH {
                return Err(ProtocolError("arrays nested too deep"));
            }
            let mut items = Vec::with_capacity(n.min(16));
            let mut at = head;
            for _ in 0..n {
                match parse(&b[at..], depth + 1)? {
                    Some((r, used)) => {
                        items.push(r);
                        at += used;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(Some(items)), at)))
        }
        _ => Err(ProtocolError("unknown reply type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[b"INCRBY", b"k:1", b"12"]);
        encode(&mut out, &[b"GET", b""]);
        assert_eq!(out, b"*3\r\n$6\r\nINCRBY\r\n$3\r\nk:1\r\n$2\r\n12\r\n*2\r\n$3\r\nGET\r\n$0\r\n\r\n");
        let mut long = Vec::new();
        encode(&mut long, &[&[b'x'; 1234]]);
        assert!(long.starts_with(b"*1\r\n$1234\r\n"));
    }

    /// Every reply of `bytes`, fed one byte at a time.
    fn byte_by_byte(bytes: &[u8]) -> Result<Vec<Reply>, ProtocolError> {
        let mut p = Parser::default();
        let mut out = Vec::new();
        for b in bytes {
            p.feed(&[*b]);
            while let Some(r) = p.next_reply()? {
                out.push(r);
            }
        }
        assert_eq!(p.buffered(), 0);
        Ok(out)
    }

    #[test]
    fn replies_in_any_pieces() {
        let stream = b"+OK\r\n:42\r\n:-7\r\n$3\r\n1\r\n\r\n$-1\r\n-ERR wrong type\r\n*2\r\n:1\r\n$1\r\nx\r\n*-1\r\n*0\r\n";
        let want = vec![
            Reply::Status(b"OK".to_vec()),
            Reply::Integer(42),
            Reply::Integer(-7),
            Reply::Bulk(Some(b"1\r\n".to_vec())),
            Reply::Bulk(None),
            Reply::Error(b"ERR wrong type".to_vec()),
            Reply::Array(Some(vec![Reply::Integer(1), Reply::Bulk(Some(b"x".to_vec()))])),
            Reply::Array(None),
            Reply::Array(Some(vec![])),
        ];
        assert_eq!(byte_by_byte(stream).unwrap(), want);
        let mut p = Parser::default();
        p.feed(stream);
        let mut all = Vec::new();
        while let Some(r) = p.next_reply().unwrap() {
            all.push(r);
        }
        assert_eq!(all, want);
        assert_eq!(Reply::Bulk(Some(b"17".to_vec())).count(), Some(17));
        assert_eq!(Reply::Bulk(None).count(), Some(0), "a key that expired counts nothing");
        assert_eq!(Reply::Status(b"OK".to_vec()).count(), None);
    }

    #[test]
    fn a_broken_or_hostile_store_is_an_error_not_a_panic_or_a_growing_buffer() {
        for bad in [&b"?\r\n"[..], b":12a\r\n", b":\r\n", b"$-2\r\n", b"$3\r\nabcd\r\n", b"+OK\n", b"*-5\r\n", b":99999999999999999999\r\n"] {
            assert!(byte_by_byte(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(byte_by_byte(format!("${}\r\n", MAX_BULK + 1).as_bytes()).unwrap_err().0, "bulk string too long");
        assert_eq!(byte_by_byte(format!("*{}\r\n", MAX_ARRAY + 1).as_bytes()).unwrap_err().0, "array too long");
        assert_eq!(byte_by_byte(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n").unwrap_err().0, "arrays nested too deep");
        // a line that never ends: refused once it is longer than any line we expect
        let mut p = Parser::default();
        p.feed(b"+");
        p.feed(&[b'a'; 2000]);
        assert!(p.next_reply().is_err());
    }

    #[test]
    fn the_buffer_does_not_keep_what_was_parsed() {
        let mut p = Parser::default();
        for i in 0..10_000 {
            p.feed(format!(":{i}\r\n").as_bytes());
            assert_eq!(p.next_reply().unwrap(), Some(Reply::Integer(i)));
        }
        assert!(p.buf.capacity() < 16 * 1024, "{}", p.buf.capacity());
    }
}
