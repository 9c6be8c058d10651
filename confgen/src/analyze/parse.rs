//! One access-log line: nginx's `combined`, crawlward's `crawlward_combined`
//! (combined, then `key=value` fields) and the throttle log's `crawlward`.
//! Values are escaped as nginx escapes them (`"`, `\` and bytes outside
//! printable ASCII as `\xHH`), so a `"` always ends a quoted field.

use crawlward_policy::Verdict;
use std::borrow::Cow;
use std::net::IpAddr;

/// A parsed line; byte fields borrow from the line.
#[derive(Debug, Clone, Default)]
pub struct Line<'a> {
    pub addr: Option<IpAddr>,
    /// Seconds since the epoch, UTC.
    pub time: i64,
    pub method: &'a [u8],
    /// The request target as sent: path and query.
    pub target: &'a [u8],
    pub status: u16,
    pub referer: &'a [u8],
    /// The User-Agent, still escaped.
    pub user_agent: &'a [u8],
    pub fields: Fields<'a>,
}

/// crawlward's fields, when the line has them.
#[derive(Debug, Clone, Default)]
pub struct Fields<'a> {
    /// `rt=`: `$request_time`, seconds.
    pub request_time: Option<f64>,
    /// `urt=`: `$upstream_response_time`, every upstream's seconds added.
    pub upstream_time: Option<f64>,
    pub agent: Option<&'a [u8]>,
    pub verdict: Option<Verdict>,
    pub action: Option<&'a [u8]>,
    pub refusal: Option<&'a [u8]>,
    /// `facets=`: the module's facet count.
    pub facets: Option<u32>,
    /// `budget=`: the budget that refused.
    pub budget: Option<&'a [u8]>,
    /// `rung=`: the ladder's rung (0 to 6 for L0 to L6, 7 for routed).
    pub rung: Option<usize>,
    /// `account=`, `tier=` and `source=`: a metered API request's account
    /// (percent-encoded), tier, and where the account came from (`key` or
    /// `variable`; absent in a log from before the module wrote it).
    pub account: Option<&'a [u8]>,
    pub tier: Option<&'a [u8]>,
    pub source: Option<&'a [u8]>,
}

/// The format a line was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    Combined,
    CrawlwardCombined,
    Throttle,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Combined => "combined",
            Format::CrawlwardCombined => "crawlward_combined",
            Format::Throttle => "crawlward (throttle log)",
        }
    }
}

/// Why a line could not be read: the part that was wrong.
pub type Reason = &'static str;

/// Parses lines, remembering the last timestamp (a busy log repeats it).
#[derive(Default)]
pub struct Parser {
    last_time: [u8; 26],
    last_value: Option<i64>,
}

impl Parser {
    pub fn parse<'a>(&mut self, line: &'a [u8]) -> Result<(Line<'a>, Format), Reason> {
        let mut out = Line::default();
        let sp = memchr::memchr(b' ', line).ok_or("address")?;
        out.addr = parse_ip(&line[..sp]);
        if out.addr.is_none() {
            return Err("address");
        }
        let mut rest = &line[sp + 1..];
        let throttle = rest.first() == Some(&b'[');
        if !throttle {
            // "- $remote_user [time] \"": the user is the client's to write (spaces, `[`,
            // anything but a `"`, which nginx writes escaped), so the time is found from the
            // request's opening quote, the line's first `"`: the 28 bytes before its space
            let quote = memchr::memchr(b'"', rest).ok_or("request")?;
            let at = quote.checked_sub(29).filter(|at| rest[quote - 1] == b' ' && (*at == 0 || rest[at - 1] == b' ')).ok_or("time")?;
            rest = &rest[at..];
        }
        // [dd/Mon/yyyy:HH:MM:SS +zzzz]
        if rest.len() < 28 || rest[0] != b'[' || rest[27] != b']' {
            return Err("time");
        }
        let stamp = &rest[1..27];
        out.time = match self.last_value {
            Some(v) if self.last_time == *stamp => v,
            _ => {
                let v = parse_time(stamp).ok_or("time")?;
                self.last_time.copy_from_slice(stamp);
                self.last_value = Some(v);
                v
            }
        };
        rest = rest[28..].strip_prefix(b" \"").ok_or("request")?;
        let end = memchr::memchr(b'"', rest).ok_or("request")?;
        let request = &rest[..end];
        // "GET /x HTTP/1.1"; a malformed request line (a TLS handshake on a
        // plain port) is still a request nginx answered
        let mut parts = request.splitn(3, |b| *b == b' ');
        if let (Some(m), Some(t)) = (parts.next(), parts.next()) {
            out.method = m;
            out.target = t;
        }
        rest = rest[end + 1..].strip_prefix(b" ").ok_or("status")?;
        if rest.len() < 3 || !rest[..3].iter().all(u8::is_ascii_digit) || rest.get(3).is_some_and(|b| *b != b' ') {
            return Err("status");
        }
        out.status = u16::from(rest[0] - b'0') * 100 + u16::from(rest[1] - b'0') * 10 + u16::from(rest[2] - b'0');
        rest = rest.get(4..).unwrap_or(b"");
        if throttle {
            parse_fields(rest, &mut out, true);
            return Ok((out, Format::Throttle));
        }
        // $body_bytes_sent "$http_referer" "$http_user_agent"
        let sp = memchr::memchr(b' ', rest).ok_or("referer and user agent")?;
        rest = rest[sp + 1..].strip_prefix(b"\"").ok_or("referer and user agent")?;
        let end = memchr::memchr(b'"', rest).ok_or("referer and user agent")?;
        out.referer = &rest[..end];
        rest = rest[end + 1..].strip_prefix(b" \"").ok_or("referer and user agent")?;
        let end = memchr::memchr(b'"', rest).ok_or("referer and user agent")?;
        out.user_agent = &rest[..end];
        rest = &rest[end + 1..];
        if rest.is_empty() {
            return Ok((out, Format::Combined));
        }
        parse_fields(rest, &mut out, false);
        let format = if out.fields.verdict.is_some() || out.fields.agent.is_some() { Format::CrawlwardCombined } else { Format::Combined };
        Ok((out, format))
    }
}

/// `key=value` and `key="value"` fields, separated by spaces; unknown keys
/// are passed over. The throttle log also carries the Referer and User-Agent here.
fn parse_fields<'a>(mut rest: &'a [u8], out: &mut Line<'a>, throttle: bool) {
    loop {
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return;
        }
        let Some(eq) = memchr::memchr2(b'=', b' ', rest) else { return };
        if rest[eq] != b'=' {
            rest = &rest[eq..];
            continue;
        }
        let key = &rest[..eq];
        rest = &rest[eq + 1..];
        let value;
        if let [b'"', tail @ ..] = rest {
            let end = memchr::memchr(b'"', tail).unwrap_or(tail.len());
            value = &tail[..end];
            rest = tail.get(end + 1..).unwrap_or(b"");
        } else {
            let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
            value = &rest[..end];
            rest = &rest[end..];
        }
        let f = &mut out.fields;
        let nonempty = |v: &'a [u8]| (!v.is_empty() && v != b"-").then_some(v);
        match key {
            b"rt" => f.request_time = seconds(value),
            b"urt" => f.upstream_time = seconds(value),
            b"agent" => f.agent = Some(value),
            b"verdict" => f.verdict = Verdict::ALL.into_iter().find(|v| v.as_str().as_bytes() == value),
            b"action" => f.action = nonempty(value),
            b"refusal" => f.refusal = nonempty(value),
            b"facets" => f.facets = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
            b"budget" => f.budget = nonempty(value),
            b"rung" => f.rung = rung_index(value),
            b"account" => f.account = nonempty(value),
            b"tier" => f.tier = nonempty(value),
            b"source" => f.source = nonempty(value),
            b"referer" if throttle => out.referer = value,
            b"ua" if throttle => out.user_agent = value,
            _ => {}
        }
    }
}

/// The row of a logged `$crawlward_rung`: L0 to L6, then `routed`.
fn rung_index(v: &[u8]) -> Option<usize> {
    match v {
        b"routed" => Some(7),
        [b'L', d @ b'0'..=b'6'] => Some(usize::from(d - b'0')),
        _ => None,
    }
}

/// `$upstream_response_time` may list several upstreams ("0.010, 0.020 : 0.005")
/// or be "-": the seconds added up, None when there is no number.
fn seconds(v: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(v).ok()?;
    let mut total = 0.0;
    let mut any = false;
    for part in text.split([',', ':', ' ']).filter(|p| !p.is_empty() && *p != "-") {
        if let Ok(x) = part.parse::<f64>() {
            if x.is_finite() && x >= 0.0 {
                total += x;
                any = true;
            }
        }
    }
    any.then_some(total)
}

/// An address: dotted IPv4 by hand (most lines), anything else by the standard parser.
fn parse_ip(b: &[u8]) -> Option<IpAddr> {
    let mut octets = [0u8; 4];
    let mut n = 0;
    let mut digits = 0;
    let mut value: u32 = 0;
    for &c in b {
        match c {
            b'0'..=b'9' if digits < 3 => {
                // no leading zeros, as the standard parser
                if digits == 1 && value == 0 {
                    return None;
                }
                value = value * 10 + u32::from(c - b'0');
                digits += 1;
            }
            b'.' if digits > 0 && n < 3 && value <= 255 => {
                octets[n] = value as u8;
                n += 1;
                digits = 0;
                value = 0;
            }
            _ => return std::str::from_utf8(b).ok()?.parse().ok(),
        }
    }
    if n == 3 && digits > 0 && value <= 255 {
        octets[3] = value as u8;
        Some(IpAddr::from(octets))
    } else {
        std::str::from_utf8(b).ok()?.parse().ok()
    }
}

/// `10/Oct/2026:13:55:36 +0000` to seconds since the epoch, UTC.
pub fn parse_time(b: &[u8]) -> Option<i64> {
    if b.len() != 26 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[14] != b':' || b[17] != b':' || b[20] != b' ' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { b[r].iter().try_fold(0i64, |acc, c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))) };
    let day = num(0..2)?;
    let month = match &b[3..6] {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return None,
    };
    let year = num(7..11)?;
    let (h, m, s) = (num(12..14)?, num(15..17)?, num(18..20)?);
    let sign = match b[21] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let offset = sign * (num(22..24)? * 3600 + num(24..26)? * 60);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A value as nginx wrote it, with its `\xHH` escapes undone.
pub fn unescape(v: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr(b'\\', v).is_none() {
        return Cow::Borrowed(v);
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'\\' && i + 3 < v.len() && v[i + 1] == b'x' {
            if let (Some(h), Some(l)) = (hex(v[i + 2]), hex(v[i + 3])) {
                out.push(h << 4 | l);
                i += 4;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    Cow::Owned(out)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The path of a request target: up to `?`.
pub fn path_of(target: &[u8]) -> &[u8] {
    match memchr::memchr(b'?', target) {
        Some(q) => &target[..q],
        None => target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined() {
        let line = br#"66.249.66.1 - - [10/Oct/2026:13:55:36 +0000] "GET /record/1?page=2 HTTP/1.1" 200 5120 "-" "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)""#;
        let (l, f) = Parser::default().parse(line).unwrap();
        assert_eq!(f, Format::Combined);
        assert_eq!(l.addr, Some("66.249.66.1".parse().unwrap()));
        assert_eq!(l.time, 1_791_640_536);
        assert_eq!((l.method, l.target, l.status), (&b"GET"[..], &b"/record/1?page=2"[..], 200));
        assert_eq!(l.referer, b"-");
        assert!(l.user_agent.starts_with(b"Mozilla/5.0 (compatible; Googlebot"));
        assert!(l.fields.verdict.is_none());
    }

    #[test]
    fn crawlward_combined_and_the_throttle_log() {
        let line = br#"2001:db8::7 - alice smith [30/Nov/2026:01:09:00 +0100] "GET /browse?b=2 HTTP/2.0" 429 0 "https://heratio.org/" "Rivetbot/1.0" rt=0.004 urt="0.010, 0.020 : 0.005" agent=Rivetbot verdict=unverified action=allow refusal=budget facets=2 budget=address-deep"#;
        let (l, f) = Parser::default().parse(line).unwrap();
        assert_eq!(f, Format::CrawlwardCombined);
        assert_eq!(l.time, 1_796_000_940 - 3600);
        assert_eq!(l.status, 429);
        let x = &l.fields;
        assert_eq!(x.request_time, Some(0.004));
        assert!((x.upstream_time.unwrap() - 0.035).abs() < 1e-12);
        assert_eq!(
            (x.agent, x.verdict, x.refusal, x.facets, x.budget),
            (Some(&b"Rivetbot"[..]), Some(Verdict::Unverified), Some(&b"budget"[..]), Some(2), Some(&b"address-deep"[..]))
        );
        let no_upstream = br#"192.0.2.1 - - [30/Nov/2026:01:09:00 +0000] "GET / HTTP/1.1" 444 0 "-" "" rt=0.000 urt="-" agent= verdict=empty action=block-444 refusal=bot-blocker"#;
        let (l, _) = Parser::default().parse(no_upstream).unwrap();
        assert_eq!((l.fields.upstream_time, l.fields.agent, l.fields.verdict), (None, Some(&b""[..]), Some(Verdict::Empty)));
        let throttle = br#"192.0.2.7 [30/Nov/2026:01:09:00 +0000] "GET /browse?b=2 HTTP/1.1" 429 agent="" purpose= verdict=none action=allow refusal=rate facet= class=default referer="-" ua="curl/7.88.1""#;
        let (l, f) = Parser::default().parse(throttle).unwrap();
        assert_eq!(f, Format::Throttle);
        assert_eq!((l.status, l.user_agent, l.fields.verdict), (429, &b"curl/7.88.1"[..], Some(Verdict::None)));
    }

    #[test]
    fn a_user_name_the_client_wrote_cannot_hide_the_line() {
        // `Authorization: Basic` names the user, and nginx logs it as it came (a `"` escaped)
        for user in ["a [b", "a [10/Oct/2026:13:55:36 +0000] b", "[", "] [", "x\\x22 [y"] {
            let line = format!(r#"192.0.2.9 - {user} [10/Oct/2026:13:55:36 +0000] "GET /browse?x=1 HTTP/1.1" 200 5 "-" "scraper/1.0""#);
            let (l, f) = Parser::default().parse(line.as_bytes()).unwrap_or_else(|e| panic!("{user}: {e}"));
            assert_eq!((f, l.time, l.target, l.user_agent), (Format::Combined, 1_791_640_536, &b"/browse?x=1"[..], &b"scraper/1.0"[..]), "{user}");
        }
    }

    #[test]
    fn what_is_wrong_with_a_line() {
        let mut p = Parser::default();
        for (line, why) in [
            (&b""[..], "address"),
            (b"not-an-address - - [10/Oct/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"x\"", "address"),
            (b"192.0.2.1 - - [10/Oct/2026:13:55:36] \"GET / HTTP/1.1\" 200 1 \"-\" \"x\"", "time"),
            (b"192.0.2.1 - - [10/Foo/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"x\"", "time"),
            (b"192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] GET / 200", "request"),
            (b"192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 20x 1 \"-\" \"x\"", "status"),
            (b"192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 1", "referer and user agent"),
        ] {
            assert_eq!(p.parse(line).err(), Some(why), "{}", String::from_utf8_lossy(line));
        }
        // a garbage request line is still a request nginx answered
        let (l, _) = p.parse(b"192.0.2.1 - - [10/Oct/2026:13:55:36 +0000] \"\\x16\\x03\\x01\" 400 150 \"-\" \"-\"").unwrap();
        assert_eq!((l.status, l.target), (400, &b""[..]));
    }

    #[test]
    fn every_cut_and_random_bytes_give_a_line_or_a_reason_never_a_panic() {
        let whole = br#"2001:db8::7 - alice [30/Nov/2026:01:09:00 +0100] "GET /browse?b=2 HTTP/2.0" 429 0 "https://heratio.org/" "Rivetbot/1.0" rt=0.004 urt="0.010, 0.020 : 0.005" agent=Rivetbot verdict=unverified action=allow refusal=budget facets=2 budget=address-deep"#;
        let mut p = Parser::default();
        for cut in 0..=whole.len() {
            let _ = p.parse(&whole[..cut]);
            let mut spliced = whole[..cut].to_vec();
            spliced.extend_from_slice(b"\"[]= \\x");
            spliced.extend_from_slice(&whole[cut..]);
            let _ = p.parse(&spliced);
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            let n = (seed % 300) as usize;
            let line: Vec<u8> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // mostly the bytes a log line is made of
                    b" -[]\"=:./0123456789aGET/\\x\xff"[(seed % 25) as usize]
                })
                .collect();
            let _ = p.parse(&line);
        }
    }

    #[test]
    fn addresses_as_the_standard_parser_reads_them() {
        for a in [
            "192.0.2.1",
            "0.0.0.0",
            "255.255.255.255",
            "2001:db8::1",
            "::ffff:192.0.2.1",
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1",
            "01.2.3.4",
            "1..2.3",
            "1.2.3.",
            "",
            "a.b.c.d",
            "1.2.3.4a",
        ] {
            assert_eq!(parse_ip(a.as_bytes()), a.parse::<IpAddr>().ok(), "{a}");
        }
    }

    #[test]
    fn escapes_and_times() {
        assert_eq!(&*unescape(b"a\\x22b\\x5Cc\\x"), b"a\"b\\c\\x");
        assert_eq!(parse_time(b"01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(parse_time(b"29/Feb/2024:23:59:59 -0130"), Some(1_709_251_199 + 5400));
        assert_eq!(path_of(b"/a?b=c"), b"/a");
    }
}
