//! What the facet guard reads from a request, parsed properly (the module's
//! facet scoring; the stock-nginx maps approximate it with regexes on the
//! raw query string): query parameters with percent-decoding and `+`,
//! repeated, empty and `=`-less parameters, and the Referer's host.
//!
//! Work is linear in the query string and allocation-free per parameter, so
//! 10,000 parameters or 8 KB values cost a pass over the bytes.

/// Facet parameters: exact names and name prefixes, compared after decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FacetNames {
    pub names: Vec<String>,
    pub prefixes: Vec<String>,
}

/// What a query string holds, for the facet guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryScan {
    /// Non-empty `&`-separated parameters (a repeated one counts each time).
    pub params: u32,
    /// Distinct facet parameters, by decoded name (`subjects[]` is `subjects`),
    /// counted up to [`MAX_DISTINCT`].
    pub facets: u32,
}

/// Distinct facets are counted up to this many; `max_facets_without_referer` may not be higher.
pub const MAX_DISTINCT: usize = 16;

/// Longest decoded name compared; longer names are compared by this prefix.
const NAME_MAX: usize = 128;

/// A hex digit's value.
pub(crate) fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode `src` into `out` (cleared first) as a form field: `+` is a
/// space, `%XX` a byte, and a `%` not followed by two hex digits stays as it
/// is (broken encoding is kept, not refused). At most `max` bytes are kept.
pub fn form_decode(src: &[u8], out: &mut Vec<u8>, max: usize) {
    out.clear();
    out.resize(max, 0);
    let n = form_decode_into(src, out);
    out.truncate(n);
}

/// [`form_decode`] into a buffer, without allocating: the decoded length.
pub fn form_decode_into(src: &[u8], out: &mut [u8]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < src.len() && n < out.len() {
        out[n] = match src[i] {
            b'+' => b' ',
            b'%' => match (src.get(i + 1).copied().and_then(hex), src.get(i + 2).copied().and_then(hex)) {
                (Some(h), Some(l)) => {
                    i += 2;
                    h << 4 | l
                }
                _ => b'%',
            },
            b => b,
        };
        n += 1;
        i += 1;
    }
    n
}

/// A parameter's name (already percent-decoded) as PHP registers it
/// (`php_register_variable_ex`), written into `out`; the length is returned.
/// So the guard counts the facets the application receives: the name ends at
/// a NUL byte, leading spaces are dropped, spaces and dots read as `_`; an
/// array (`subjects[]`, `places[0]`) is named by what comes before its `[`,
/// and a `[` with no `]` after it reads as `_` (PHP 8), as do the spaces,
/// dots and `[` after it.
pub fn php_name(name: &[u8], out: &mut [u8]) -> usize {
    let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
    let name = &name[name.iter().position(|b| *b != b' ').unwrap_or(name.len())..];
    let (body, open_bracket) = match name.iter().position(|b| *b == b'[') {
        Some(i) if name[i + 1..].contains(&b']') => (&name[..i], false),
        _ => (name, true),
    };
    let mut n = 0;
    for &b in body.iter().take(out.len()) {
        out[n] = if b == b' ' || b == b'.' || (open_bracket && b == b'[') { b'_' } else { b };
        n += 1;
    }
    n
}

/// Whether a raw name may read differently once decoded and registered as
/// PHP does (see [`php_name`]); names without these bytes are compared as sent.
const fn needs_php_name(b: u8) -> bool {
    matches!(b, b'%' | b'+' | b' ' | b'.' | b'[' | 0)
}

/// [`scan_query`]'s view of a byte, one table lookup: whether it ends a
/// parameter's name (`=` or `&`), and whether it makes PHP rewrite the name.
const ENDS_NAME: u8 = 1;
const PHP_REWRITES: u8 = 2;
static BYTE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if b == b'=' as usize || b == b'&' as usize {
            t[b] = ENDS_NAME;
        } else if needs_php_name(b as u8) {
            t[b] = PHP_REWRITES;
        }
        b += 1;
    }
    t
};

/// A facet name from a configuration, as the guard compares it.
pub fn facet_name_owned(name: &str) -> String {
    let mut out = vec![0u8; name.len()];
    let n = php_name(name.as_bytes(), &mut out);
    out.truncate(n);
    String::from_utf8_lossy(&out).into_owned()
}

/// Which facet a parameter name is.
enum FacetId {
    /// One of the exact names, by its place in the list.
    Name(usize),
    /// A name under a prefix: it can be any, so it is told apart by a hash.
    Prefixed(u64),
}

impl FacetNames {
    fn facet(&self, name: &[u8]) -> Option<FacetId> {
        if name.is_empty() {
            return None;
        }
        if let Some(i) = self.names.iter().position(|n| n.as_bytes() == name) {
            return Some(FacetId::Name(i));
        }
        self.prefixes
            .iter()
            .any(|p| name.starts_with(p.as_bytes()))
            .then(|| FacetId::Prefixed(name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))))
    }
}

/// Count the parameters and distinct facets of a query string (without `?`),
/// without allocating: names are decoded into a buffer on the stack and the
/// distinct ones remembered by a 64-bit hash.
pub fn scan_query(query: &[u8], facets: &FacetNames) -> QueryScan {
    let mut scan = QueryScan::default();
    let mut names_seen = 0u64;
    let mut seen = [0u64; MAX_DISTINCT];
    let mut prefixed = 0;
    let mut distinct = 0;
    fn remember(seen: &mut [u64; MAX_DISTINCT], prefixed: &mut usize, distinct: &mut usize, h: u64) {
        if !seen[..*prefixed].contains(&h) {
            seen[*prefixed] = h;
            *prefixed += 1;
            *distinct += 1;
        }
    }
    let n = query.len();
    let mut i = 0;
    // one pass over the bytes: each parameter's name end, and whether it needs decoding
    while i <= n {
        let start = i;
        // the name, up to '=' (or the end of the parameter), then the value
        let mut classes = 0;
        while i < n {
            let class = BYTE_CLASS[query[i] as usize];
            if class & ENDS_NAME != 0 {
                break;
            }
            classes |= class;
            i += 1;
        }
        let encoded = classes & PHP_REWRITES != 0;
        let name_end = if i < n && query[i] == b'=' { Some(i) } else { None };
        i += query[i..].iter().position(|b| *b == b'&').unwrap_or(n - i);
        let end = i;
        i += 1;
        if end == start {
            continue;
        }
        scan.params = scan.params.saturating_add(1);
        if distinct >= MAX_DISTINCT {
            continue;
        }
        let raw_name = &query[start..name_end.unwrap_or(end)];
        let id = if encoded {
            // the buffers are only made (and zeroed) for a name that needs decoding
            let mut buf = [0u8; NAME_MAX];
            let len = form_decode_into(raw_name, &mut buf);
            let mut name = [0u8; NAME_MAX];
            let len = php_name(&buf[..len], &mut name);
            facets.facet(&name[..len])
        } else {
            facets.facet(&raw_name[..raw_name.len().min(NAME_MAX)])
        };
        match id {
            // exact names by a bit each (the first 64; past that, by hash)
            Some(FacetId::Name(k)) if k < 64 && names_seen & (1 << k) == 0 => {
                names_seen |= 1 << k;
                distinct += 1;
            }
            Some(FacetId::Name(k)) if k < 64 => {}
            Some(FacetId::Name(k)) => remember(&mut seen, &mut prefixed, &mut distinct, k as u64 ^ 0x5bd1_e995_0000_0000),
            Some(FacetId::Prefixed(h)) => remember(&mut seen, &mut prefixed, &mut distinct, h),
            None => {}
        }
    }
    scan.facets = distinct as u32;
    scan
}

/// The host of a Referer (`scheme://[user@]host[:port]/...`), lower-cased,
/// without a trailing dot; None unless the scheme is http or https.
pub fn referer_host(referer: &[u8]) -> Option<String> {
    let lower = |s: &[u8]| s.to_ascii_lowercase();
    let rest = if referer.len() > 8 && lower(&referer[..8]) == b"https://" {
        &referer[8..]
    } else if referer.len() > 7 && lower(&referer[..7]) == b"http://" {
        &referer[7..]
    } else {
        return None;
    };
    let end = rest.iter().position(|b| matches!(b, b'/' | b'?' | b'#' | b'\\')).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = match authority.iter().rposition(|b| *b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let host = if host_port.first() == Some(&b'[') {
        let close = host_port.iter().position(|b| *b == b']')?;
        &host_port[..=close]
    } else {
        match host_port.iter().rposition(|b| *b == b':') {
            Some(colon) => &host_port[..colon],
            None => host_port,
        }
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    let valid = match host.strip_prefix(b"[").and_then(|h| h.strip_suffix(b"]")) {
        // an IPv6 literal
        Some(literal) => !literal.is_empty() && literal.iter().all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.')),
        // a name: labels of host-name bytes, none empty (one trailing dot is already gone)
        None => host.split(|b| *b == b'.').all(|label| !label.is_empty() && label.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))),
    };
    if !valid {
        return None;
    }
    Some(String::from_utf8_lossy(&lower(host)).into_owned())
}

/// Whether the Referer's host is exactly one of `hosts` (compared without case).
pub fn same_site(referer: &[u8], hosts: &[String]) -> bool {
    referer_host(referer).is_some_and(|h| hosts.iter().any(|s| s.eq_ignore_ascii_case(&h)))
}

/// The facet guard on browse pages (layer 2 of heratio.org's guide), as the module runs
/// it: parsed query strings and Referer hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FacetGuard {
    pub facets: FacetNames,
    /// A crawler with this many parameters or more is refused.
    pub crawler_max_params: u32,
    /// This many distinct facets or more without a same-site Referer are refused.
    pub max_facets_without_referer: u32,
    pub same_site_hosts: Vec<String>,
    /// Whether verified crawlers skip both rules.
    pub exempt_verified: bool,
    /// Retry-After seconds on its 429.
    pub retry_after: u32,
    /// Path prefixes it applies to (the browse pages); empty: every path.
    pub paths: Vec<String>,
}

impl Default for FacetGuard {
    /// The defaults of both the policy's `browse_shed` and `crawlward_facets`.
    fn default() -> Self {
        FacetGuard {
            facets: FacetNames::default(),
            crawler_max_params: 4,
            max_facets_without_referer: 2,
            same_site_hosts: Vec::new(),
            exempt_verified: false,
            retry_after: 30,
            paths: Vec::new(),
        }
    }
}

/// Who the facet guard sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FacetSubject {
    /// No crawler User-Agent: only the facets-without-Referer rule applies.
    Person,
    /// A crawler User-Agent (or none): both rules apply.
    Crawler,
    /// A verified crawler, with `exempt_verified` set: no rule applies.
    Exempt,
}

impl FacetSubject {
    pub const ALL: [FacetSubject; 3] = [FacetSubject::Person, FacetSubject::Crawler, FacetSubject::Exempt];

    pub fn of(verdict: crate::Verdict, exempt_verified: bool) -> FacetSubject {
        if verdict == crate::Verdict::Verified && exempt_verified {
            FacetSubject::Exempt
        } else if verdict.is_crawler() {
            FacetSubject::Crawler
        } else {
            FacetSubject::Person
        }
    }

    /// The token the rendered nginx maps use.
    pub fn as_str(self) -> &'static str {
        match self {
            FacetSubject::Person => "0",
            FacetSubject::Crawler => "1",
            FacetSubject::Exempt => "x",
        }
    }
}

/// The facet guard's rule on a browse page, given what the request shows.
/// The module ([`FacetGuard::decide`]), `crawlward explain` and the stock
/// render (through [`crate::Policy::facet_rule`]) all decide here.
pub fn facet_rule(subject: FacetSubject, params_over: bool, facets_over: bool, same_site: bool) -> Option<crate::Rule> {
    match subject {
        FacetSubject::Exempt => None,
        FacetSubject::Crawler if params_over => Some(crate::Rule::FacetCrawlerParams),
        _ if facets_over && !same_site => Some(crate::Rule::FacetNoReferer),
        _ => None,
    }
}

/// What the facet guard saw and decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FacetOutcome {
    pub scan: QueryScan,
    pub rule: Option<crate::Rule>,
}

impl FacetGuard {
    /// Whether a request path is one the guard applies to.
    pub fn applies_to(&self, path: &[u8]) -> bool {
        self.paths.is_empty() || self.paths.iter().any(|p| path.starts_with(p.as_bytes()))
    }

    /// [`facet_rule`] on the parsed query string and Referer host.
    pub fn decide(&self, verdict: crate::Verdict, query: &[u8], referer: Option<&[u8]>) -> FacetOutcome {
        let scan = scan_query(query, &self.facets);
        let subject = FacetSubject::of(verdict, self.exempt_verified);
        let same_site = referer.is_some_and(|r| same_site(r, &self.same_site_hosts));
        let rule = facet_rule(subject, scan.params >= self.crawler_max_params, scan.facets >= self.max_facets_without_referer, same_site);
        FacetOutcome { scan, rule }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facets() -> FacetNames {
        FacetNames { names: vec!["subjects".into(), "places".into(), facet_name_owned("place name")], prefixes: vec!["filter_".into()] }
    }

    #[test]
    fn counts_parameters_and_distinct_facets() {
        let f = facets();
        let s = |q: &str| {
            let r = scan_query(q.as_bytes(), &f);
            (r.params, r.facets)
        };
        assert_eq!(s(""), (0, 0));
        assert_eq!(s("subjects=1&places=2"), (2, 2));
        assert_eq!(s("subjects=1&subjects=2&subjects=3"), (3, 1), "repeated: one facet, three parameters");
        assert_eq!(s("subjects[]=1&subjects[]=2&places[0]=x"), (3, 2), "PHP arrays");
        assert_eq!(s("&&subjects=1&&&page=2&"), (2, 1), "empty parameters do not count");
        assert_eq!(s("subjects&places"), (2, 2), "parameters without =");
        assert_eq!(s("subjects=&places="), (2, 2), "empty values");
        assert_eq!(s("%73ubjects=1&pl%61ces=2"), (2, 2), "percent-encoded names");
        assert_eq!(s("place+name=1&place%20name=2"), (2, 1), "+ is a space");
        assert_eq!(s("filter_a=1&filter_b=2&filter_=3"), (3, 3), "prefixes");
        assert_eq!(s("SUBJECTS=1&Places=2"), (2, 0), "names are exact");
        assert_eq!(s("subjects%=1&%zzplaces=2&%"), (3, 0), "broken encoding kept as is");
        assert_eq!(s("=1&=2"), (2, 0));
    }

    #[test]
    fn names_are_read_as_php_reads_them() {
        let f = FacetNames { names: vec!["subjects".into(), "places".into(), facet_name_owned("place name"), facet_name_owned("a.b")], prefixes: vec![] };
        let s = |q: &str| scan_query(q.as_bytes(), &f).facets;
        assert_eq!(s("+subjects=1&places=2"), 2, "a leading space (+) is dropped");
        assert_eq!(s("%20%20subjects=1&places=2"), 2, "leading spaces, percent-encoded");
        assert_eq!(s("subjects%00x=1&places=2"), 2, "the name ends at a NUL");
        assert_eq!(s("subjects%00=1&places%00.evil=2"), 2);
        assert_eq!(s("place.name=1&subjects=2"), 2, "a dot is _: place_name, as \"place name\" is");
        assert_eq!(s("place+name=1&place_name=2&a_b=3"), 2, "place name, place_name: one facet; a.b is a_b");
        assert_eq!(s("subjects[]=1&places[x]=2"), 2, "arrays by their name");
        assert_eq!(s("subjects[=1&places=2"), 1, "a [ with no ] is _: subjects_ is no facet");
        assert_eq!(s("[subjects]=1&places=2"), 1, "an empty name is no parameter PHP keeps");
        let mut out = [0u8; 32];
        let n = php_name(b"  a.b c[d", &mut out);
        assert_eq!(&out[..n], b"a_b_c_d");
        let n = php_name(b"x.y[0].z", &mut out);
        assert_eq!(&out[..n], b"x_y");
        assert_eq!(facet_name_owned("subjects[]"), "subjects");
    }

    #[test]
    fn hostile_queries_are_bounded() {
        let f = facets();
        let many: Vec<String> = (0..10_000).map(|i| format!("filter_{i}=x")).collect();
        let r = scan_query(many.join("&").as_bytes(), &f);
        assert_eq!((r.params, r.facets), (10_000, MAX_DISTINCT as u32));
        let long = format!("subjects={}&places={}", "x".repeat(8192), "%".repeat(8192));
        assert_eq!(scan_query(long.as_bytes(), &f), QueryScan { params: 2, facets: 2 });
        let long_name = format!("{}=1&subjects=2", "filter_".repeat(2000));
        assert_eq!(scan_query(long_name.as_bytes(), &f).facets, 2);
        let mut out = Vec::new();
        form_decode(b"%4", &mut out, 10);
        assert_eq!(out, b"%4");
        form_decode(b"a%41%", &mut out, 10);
        assert_eq!(out, b"aA%");
    }

    #[test]
    fn the_guard_decides_like_seed_000() {
        use crate::{Rule, Verdict};
        let g = FacetGuard {
            facets: facets(),
            crawler_max_params: 4,
            max_facets_without_referer: 2,
            same_site_hosts: vec!["heratio.org".into()],
            exempt_verified: false,
            retry_after: 30,
            paths: vec![],
        };
        let d = |v: Verdict, q: &str, r: Option<&str>| g.decide(v, q.as_bytes(), r.map(str::as_bytes)).rule;
        assert_eq!(d(Verdict::Unverified, "a=1&b=2&c=3&page=2", None), Some(Rule::FacetCrawlerParams));
        assert_eq!(d(Verdict::Empty, "a=1&b=2&c=3&d=4", None), Some(Rule::FacetCrawlerParams), "no User-Agent is a crawler");
        assert_eq!(d(Verdict::None, "a=1&b=2&c=3&d=4", None), None, "a person may use many parameters");
        assert_eq!(d(Verdict::None, "subjects=1&places=2", None), Some(Rule::FacetNoReferer));
        assert_eq!(d(Verdict::None, "subjects=1&places=2", Some("https://heratio.org/glam/browse")), None);
        assert_eq!(d(Verdict::None, "subjects=1&places=2", Some("https://evil.example/?heratio.org")), Some(Rule::FacetNoReferer));
        assert_eq!(d(Verdict::None, "subjects=1&subjects=2", None), None, "one facet, repeated");
        assert_eq!(d(Verdict::Verified, "a=1&b=2&c=3&d=4", None), Some(Rule::FacetCrawlerParams), "verified, not exempt");
        let exempt = FacetGuard { exempt_verified: true, ..g.clone() };
        assert_eq!(exempt.decide(Verdict::Verified, b"a=1&b=2&c=3&d=4&subjects=1&places=2", None).rule, None);
        assert_eq!(g.decide(Verdict::None, b"subjects=1&places=2&x=3", None).scan, QueryScan { params: 3, facets: 2 });
    }

    #[test]
    fn referer_hosts_compare_exactly() {
        let hosts = vec!["heratio.org".to_string(), "www.heratio.org".to_string()];
        for ok in [
            "https://heratio.org/glam/browse",
            "http://heratio.org",
            "https://HERATIO.org:443/x?y",
            "https://www.heratio.org./",
            "https://user@heratio.org/",
            "https://heratio.org#top",
        ] {
            assert!(same_site(ok.as_bytes(), &hosts), "{ok}");
        }
        for bad in [
            "https://evil.example/?heratio.org",
            "https://heratio.org.evil.example/",
            "https://evil.example/heratio.org",
            "https://heratio.org@evil.example/",
            "ftp://heratio.org/",
            "heratio.org",
            "//heratio.org/",
            "https://",
            "https://xheratio.org/",
            "https://evil.example\\@heratio.org/",
            "",
        ] {
            assert!(!same_site(bad.as_bytes(), &hosts), "{bad}");
        }
        assert_eq!(referer_host(b"https://[2001:db8::1]:8443/").as_deref(), Some("[2001:db8::1]"));
    }

    /// Found by the referer fuzz target: `HTTP://us../` gave the host `us.`,
    /// with a trailing dot the function says it removes. A host with an empty
    /// label, or brackets and colons outside an IPv6 literal, is no host.
    #[test]
    fn a_referer_host_has_no_empty_label() {
        for bad in [
            "HTTP://us../uw",
            "https://heratio.org../",
            "https://.heratio.org/",
            "https://heratio..org/",
            "https://./",
            "https://a:b:c/",
            "https://a]b/",
            "https://[]/",
            "https://[x]/",
        ] {
            assert_eq!(referer_host(bad.as_bytes()), None, "{bad}");
        }
        assert!(!same_site(b"https://heratio.org../", &["heratio.org".to_string(), "heratio.org.".to_string()]));
        assert_eq!(referer_host(b"https://www.heratio.org./").as_deref(), Some("www.heratio.org"));
        assert_eq!(referer_host(b"http://[::ffff:192.0.2.1]/").as_deref(), Some("[::ffff:192.0.2.1]"));
    }
}
