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
/// Most elements in one array reply: the browse cap's `HGETALL` with every
/// node of `nodes=1000` and as many stale or foreign fields (deleted 64 a
/// round trip), twice that for field and value, with room to spare.
pub const MAX_ARRAY: usize = 8 * 1024;
/// Most bytes one reply may take: what the largest accepted reply needs
/// (8,192 elements of node names and values, under 100 bytes a pair), four
/// times over. A store that sends more is broken or hostile.
pub const MAX_REPLY: usize = 1 << 20;
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

/// Replies parsed from bytes fed in any pieces, each byte once: an array's
/// elements are kept as they are parsed, so a reply that arrives a few bytes
/// at a time costs what it would in one piece (only an element that is not
/// whole yet is looked at again, its first line).
#[derive(Debug, Default)]
pub struct Parser {
    buf: Vec<u8>,
    /// Bytes of `buf` parsed: into replies handed out, or into `open`.
    done: usize,
    /// The arrays of the reply being parsed, outermost first: how many
    /// elements each still needs, and those parsed.
    open: Vec<(usize, Vec<Reply>)>,
    /// Bytes the reply being parsed has taken so far.
    reply_bytes: usize,
    /// Elements looked at (for the tests: each is looked at once, or again only while incomplete).
    #[cfg(test)]
    looks: usize,
}

/// One element at the start of the bytes: a whole value, or an array's header.
enum Element {
    Value(Reply),
    Array(usize),
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
        loop {
            #[cfg(test)]
            {
                self.looks += 1;
            }
            let rest = &self.buf[self.done..];
            let Some((element, used)) = element(rest)? else {
                if self.reply_bytes + rest.len() > MAX_REPLY {
                    return Err(ProtocolError("reply too long"));
                }
                return Ok(None);
            };
            self.done += used;
            self.reply_bytes += used;
            if self.reply_bytes > MAX_REPLY {
                return Err(ProtocolError("reply too long"));
            }
            let mut value = match element {
                Element::Value(v) => v,
                Element::Array(_) if self.open.len() >= MAX_DEPTH => return Err(ProtocolError("arrays nested too deep")),
                Element::Array(0) => Reply::Array(Some(Vec::new())),
                Element::Array(n) => {
                    self.open.push((n, Vec::with_capacity(n.min(16))));
                    continue;
                }
            };
            // the value ends the arrays it completes
            loop {
                let Some((left, items)) = self.open.last_mut() else {
                    self.reply_bytes = 0;
                    return Ok(Some(value));
                };
                items.push(value);
                *left -= 1;
                if *left > 0 {
                    break;
                }
                let (_, items) = self.open.pop().expect("an open array");
                value = Reply::Array(Some(items));
            }
        }
    }

    /// Forget everything fed (a new connection).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.done = 0;
        self.open.clear();
        self.reply_bytes = 0;
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

/// One element at the start of `b` and the bytes it takes, None if incomplete.
fn element(b: &[u8]) -> Result<Option<(Element, usize)>, ProtocolError> {
    let Some(kind) = b.first() else { return Ok(None) };
    let Some((text, head)) = line(&b[1..])? else { return Ok(None) };
    let head = head + 1;
    let value = |r| Ok(Some((Element::Value(r), head)));
    match kind {
        b'+' => value(Reply::Status(text.to_vec())),
        b'-' => value(Reply::Error(text.to_vec())),
        b':' => value(Reply::Integer(number(text)?)),
        b'$' => {
            let n = number(text)?;
            if n == -1 {
                return value(Reply::Bulk(None));
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
            Ok(Some((Element::Value(Reply::Bulk(Some(b[head..head + n].to_vec()))), head + n + 2)))
        }
        b'*' => {
            let n = number(text)?;
            if n == -1 {
                return value(Reply::Array(None));
            }
            let n = usize::try_from(n).map_err(|_| ProtocolError("bad array length"))?;
            if n > MAX_ARRAY {
                return Err(ProtocolError("array too long"));
            }
            Ok(Some((Element::Array(n), head)))
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

    /// `reply` as the store would send it, and as a Reply.
    fn hgetall(fields: usize) -> (Vec<u8>, Reply) {
        let mut wire = format!("*{}\r\n", 2 * fields).into_bytes();
        let mut items = Vec::new();
        for i in 0..fields {
            let (f, v) = (format!("node-{i:04}"), format!("{}:{}", i % 7, 1_764_000_000_000u64 + i as u64));
            wire.extend_from_slice(format!("${}\r\n{f}\r\n${}\r\n{v}\r\n", f.len(), v.len()).as_bytes());
            items.push(Reply::Bulk(Some(f.into_bytes())));
            items.push(Reply::Bulk(Some(v.into_bytes())));
        }
        (wire, Reply::Array(Some(items)))
    }

    #[test]
    fn a_reply_dripped_a_few_bytes_at_a_time_is_parsed_once() {
        // the browse hash of 1,000 nodes and as many stale fields: 4,000 elements, about 100 kB,
        // in pieces of 7 bytes (a store that drips its reply)
        let (wire, want) = hgetall(2_000);
        let mut p = Parser::default();
        let mut got = None;
        let pieces = wire.len().div_ceil(7);
        for piece in wire.chunks(7) {
            p.feed(piece);
            if let Some(r) = p.next_reply().unwrap() {
                got = Some(r);
            }
        }
        assert_eq!(got, Some(want));
        // each element looked at once, and once more for each piece it was not whole in
        assert!(p.looks <= 4_001 + pieces + 1, "{} looks for {} elements in {pieces} pieces", p.looks, 4_001);
    }

    #[test]
    fn the_replies_the_accepted_configurations_produce_are_accepted() {
        // nodes=1000 (the most crawl_budget.sync.nodes accepts) and 513 junk fields a client of
        // the store wrote: the stale ones are deleted 64 a round trip, so the reply must parse
        let (wire, want) = hgetall(1_513);
        assert_eq!(byte_by_byte(&wire).unwrap(), vec![want]);
        // and a reply past every bound is refused, whatever its pieces
        let (huge, _) = hgetall(MAX_ARRAY / 2);
        let mut p = Parser::default();
        let mut outcome = Ok(None);
        for piece in huge.chunks(4096) {
            p.feed(piece);
            outcome = p.next_reply();
            if outcome.is_err() {
                break;
            }
        }
        assert!(outcome.is_ok(), "{} bytes: {outcome:?}", huge.len());
        let mut over = format!("*2\r\n${MAX_BULK}\r\n").into_bytes();
        over.extend(std::iter::repeat_n(b'x', MAX_BULK));
        over.extend_from_slice(b"\r\n");
        let mut p = Parser::default();
        p.feed(&over);
        assert_eq!(p.next_reply().unwrap(), None, "one element of two");
        let mut many = Vec::new();
        for _ in 0..16 {
            many.extend_from_slice(format!("${MAX_BULK}\r\n").as_bytes());
            many.extend(std::iter::repeat_n(b'x', MAX_BULK));
            many.extend_from_slice(b"\r\n");
        }
        let mut p = Parser::default();
        p.feed(b"*16\r\n");
        p.feed(&many);
        assert_eq!(p.next_reply().unwrap_err().0, "reply too long");
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
