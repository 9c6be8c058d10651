//! One client's requests over a sliding window, kept online in a fixed
//! number of bytes, for the proportional classifier to score on every
//! request ([`ClientWindow::observed`] gives [`classifier::score`] its
//! input, the same as `crawlward analyze` builds from a log).
//!
//! The window slides in halves of its own length, as sliding-window rate
//! limiters do: the record keeps the current period (started by the
//! client's first request, then every window length after) and the one
//! before it, and counts the earlier one in proportion to the part of it
//! still inside the window. While a client is younger than the window, as
//! every client in a short test is, the figures are exact but for the
//! sketches' own error:
//!
//! - distinct URLs (the path and the query, [`url_hash`]): linear counting
//!   on a 1,024-bit bitmap up to about 3,000 URLs (standard error 2.2% at
//!   100, 4% at 3,000), then a HyperLogLog of 256 registers (6.5%);
//! - the busiest URLs and User-Agent families: [`TOP_PATHS`] and
//!   [`TOP_FAMILIES`] counters with HeavyKeeper's exponential decay (counts
//!   never over the truth; a key once busy is not pushed out by a stream of
//!   keys seen once);
//! - sessions: the first [`TOP_SESSIONS`] of a period, followed to its end
//!   (a sample: the busiest session's share and the share seen from more
//!   than one address are taken over them).
//!
//! Nothing here allocates: a record is plain integers (`repr(C)`, no
//! pointers), so it can live in nginx shared memory.

use crate::classifier::{honoured_count, Observed, RuleCounts, Sessions};

/// The distinct count's bitmap, and its HyperLogLog's registers (four bits each).
pub const BITMAP_BITS: usize = 1024;
pub const REGISTERS: usize = 256;
/// The busiest paths held (the concentration is taken over the classifier's `top_paths`, 12, of them:
/// the spare counters give a busy path room to climb past keys seen once).
pub const TOP_PATHS: usize = 16;
pub const TOP_FAMILIES: usize = 4;
pub const TOP_SESSIONS: usize = 4;

/// A 64-bit finalizer (splitmix64's), to spread a key's bits.
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of bytes, keyed by `seed` (a table's own random seed, so that no
/// client can choose keys that collide): eight bytes at a time, each folded
/// in by a full 64 x 64 multiply whose two halves are XORed (as wyhash and
/// foldhash do), then [`mix`]. A plain multiply, as FxHash has, keeps a
/// difference in the top bit a difference in the top bit whatever the
/// state, so a client could cancel it with the next word and make two
/// strings collide under every seed; the folded product's difference
/// depends on the state, which the seed hides.
pub fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let fold = |h: u64, w: u64| {
        let p = u128::from(h ^ w) * u128::from(K);
        (p as u64) ^ ((p >> 64) as u64)
    };
    let mut h: u64 = seed ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = fold(h, u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    // the length at the end too: at the start alone, a first word XORed with the difference
    // of two lengths made up for it (`Mozilla/` and `Lozilla/` and a NUL)
    mix(fold(fold(h, u64::from_le_bytes(tail)), bytes.len() as u64))
}

/// The hash of a URL as the ladder counts it, keyed by `seed`: the path the
/// application sees and the query (`$args`), as `path?query` (the path alone
/// when the query is empty): a facet or sort variant is a page of its own.
pub fn url_hash(seed: u64, path: &[u8], query: &[u8]) -> u64 {
    let path_hash = hash_bytes(seed, path);
    if query.is_empty() {
        return path_hash;
    }
    mix(path_hash.rotate_left(17) ^ hash_bytes(seed ^ 0x7175_6572_795f_3f3f, query))
}

/// A hash of bytes fed in pieces (FNV-1a, then [`mix`]), keyed by a seed: for
/// a key written in parts, without gathering them first.
pub struct PieceHash(u64);

impl PieceHash {
    pub fn new(seed: u64) -> PieceHash {
        PieceHash(0xcbf2_9ce4_8422_2325 ^ seed)
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        mix(self.0)
    }
}

/// What one request shows of its client. Hashes are of the URL ([`url_hash`]:
/// nginx's normalized path as the application sees it, and the query), the User-Agent family ([`crate::signals::ua_family`]), the
/// application's session cookie, and the address.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    pub now_ms: i64,
    pub path: u64,
    pub family: u64,
    pub session: Option<u64>,
    pub address: u64,
    /// On one of the policy's authentication routes.
    pub auth: bool,
    /// For /robots.txt, or the sitemap.
    pub robots: bool,
    pub sitemap: bool,
    /// On a path the published robots.txt disallows for this client.
    pub disallowed: bool,
    /// The User-Agent declares a bot, and gives a contact.
    pub declared: bool,
    pub contact: bool,
}

/// Distinct keys: a bitmap of [`BITMAP_BITS`] bits, read by linear
/// counting while it is less than 95% full (up to about 3,000 keys; a
/// standard error of 2.2% at 100 keys, 2.5% at 700, 4% at 3,000), then a
/// HyperLogLog of [`REGISTERS`] four-bit registers (1.04 / sqrt(256), 6.5%;
/// registers stop at 15, about four million keys).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Distinct {
    bitmap: [u64; BITMAP_BITS / 64],
    /// Two registers a byte, the low nibble first.
    registers: [u8; REGISTERS / 2],
}

impl Distinct {
    const EMPTY: Distinct = Distinct { bitmap: [0; BITMAP_BITS / 64], registers: [0; REGISTERS / 2] };

    /// Count `hash`; whether its bit in the bitmap was new (the caller keeps
    /// the number of bits set, for [`Self::count_set`]).
    pub fn insert(&mut self, hash: u64) -> bool {
        let bit = ((hash >> 40) as usize) & (BITMAP_BITS - 1);
        let word = &mut self.bitmap[bit / 64];
        let new = *word & (1 << (bit % 64)) == 0;
        *word |= 1 << (bit % 64);
        let index = (hash as usize) & (REGISTERS - 1);
        let rank = ((hash >> 8).trailing_zeros() + 1).min(15) as u8;
        let byte = &mut self.registers[index / 2];
        let shift = (index % 2) * 4;
        if rank > (*byte >> shift) & 0xf {
            *byte = (*byte & !(0xf << shift)) | (rank << shift);
        }
        new
    }

    /// The estimate, given the number of bits set in the bitmap (kept as they
    /// are set: x86-64's baseline has no popcnt to count 16 words on every
    /// request).
    pub fn count_set(&self, set: u32) -> f64 {
        let m = BITMAP_BITS as f64;
        let zeros = BITMAP_BITS - (set as usize).min(BITMAP_BITS);
        if zeros as f64 > 0.05 * m {
            return m * (m / zeros as f64).ln();
        }
        let m = REGISTERS as f64;
        let register = |i: usize| (self.registers[i / 2] >> ((i % 2) * 4)) & 0xf;
        let sum: f64 = (0..REGISTERS).map(|i| (-f64::from(register(i))).exp2()).sum();
        0.7213 / (1.0 + 1.079 / m) * m * m / sum
    }
}

/// One heavy-hitter counter: a key (0 is a free counter) and its count, and
/// for a session the first address it was seen from (31 bits) above a bit
/// set once it is seen from another.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counter {
    pub key: u32,
    pub count: u32,
    pub address: u32,
}

/// How fast a counter decays when its place is disputed: a key not held
/// takes one count from the lightest of [`CHOICES`] counters the coin picks
/// with probability DECAY^-count (HeavyKeeper's exponential decay), and its
/// place once that reaches 0. A busy key is almost never decayed (at a
/// count of 30, 1 in 800), so a stream of keys seen once cannot push the
/// heavy hitters out or inflate their counts; counts are never over the
/// truth. Chosen on the classifier article's flash-sale monitor scaled to
/// 3,000 requests (nine paths of 1.5% each among 600 seen once or twice):
/// the entropy of its busiest paths within 0.11 bits in 40 runs of 40.
const DECAY: f64 = 1.25;
const CHOICES: usize = 6;

/// Count `key` (never 0) in a heavy-hitter table, with `random` a hash
/// that decides a decay; its counter, when it holds one.
fn count_in(table: &mut [Counter], key: u32, random: u64) -> Option<&mut Counter> {
    if let Some(i) = table.iter().position(|c| c.key == key) {
        table[i].count = table[i].count.saturating_add(1);
        return Some(&mut table[i]);
    }
    // a free counter, else the lighter of two the coin picks: always the lightest would let
    // keys that came early and stopped hold their places while the one counter left churns
    let i = match table.iter().position(|c| c.key == 0) {
        Some(free) => free,
        None if table.is_empty() => return None,
        None => (0..CHOICES).map(|k| ((random >> (8 * k)) as usize) % table.len()).min_by_key(|&i| table[i].count).unwrap_or(0),
    };
    let c = &mut table[i];
    if c.key != 0 {
        let chance = DECAY.powi(-(c.count.min(1_000) as i32));
        if (random >> 11) as f64 / (1u64 << 53) as f64 >= chance {
            return None;
        }
        c.count -= 1;
        if c.count > 0 {
            return None;
        }
    }
    *c = Counter { key, count: 1, address: 0 };
    Some(c)
}

/// Count `key` (never 0) if the table holds it or has room: the first keys
/// of a period, a sample. Sessions are held so: many sessions alike (a pool
/// of stolen ones) leave no heavy hitter for a decay to keep, while the
/// first few seen, followed to the end of the period, show how a session
/// of that client is used.
fn hold_first(table: &mut [Counter], key: u32) -> Option<&mut Counter> {
    let i = table.iter().position(|c| c.key == key || c.key == 0)?;
    let c = &mut table[i];
    if c.key == 0 {
        *c = Counter { key, count: 0, address: 0 };
    }
    c.count = c.count.saturating_add(1);
    Some(c)
}

/// A counter's key: a hash's top 32 bits, never 0 (a free counter).
fn counter_key(hash: u64) -> u32 {
    ((hash >> 32) as u32).max(1)
}

/// One period of the window.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Period {
    pub requests: u32,
    pub auth: u32,
    pub declared: u32,
    pub contact: u32,
    pub disallowed: u32,
    /// Bit 0: robots.txt fetched; bit 1: the sitemap.
    pub fetched: u32,
    /// The most requests in one clock minute.
    pub peak_minute: u32,
    /// Bits set in `paths`' bitmap.
    pub paths_set: u32,
    pub paths: Distinct,
    pub top_paths: [Counter; TOP_PATHS],
    pub families: [Counter; TOP_FAMILIES],
    pub sessions: [Counter; TOP_SESSIONS],
}

impl Period {
    const EMPTY: Period = Period {
        requests: 0,
        auth: 0,
        declared: 0,
        contact: 0,
        disallowed: 0,
        fetched: 0,
        peak_minute: 0,
        paths_set: 0,
        paths: Distinct::EMPTY,
        top_paths: [Counter { key: 0, count: 0, address: 0 }; TOP_PATHS],
        families: [Counter { key: 0, count: 0, address: 0 }; TOP_FAMILIES],
        sessions: [Counter { key: 0, count: 0, address: 0 }; TOP_SESSIONS],
    };
}

/// A client's window: the current period and the one before.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ClientWindow {
    /// When the current period started (ms).
    pub period_start: i64,
    /// The clock minute of the last request, and the requests in it.
    minute: i64,
    minute_count: u32,
    _pad: u32,
    pub current: Period,
    pub previous: Period,
}

/// A session seen from a second address.
const CROSS_ADDRESS: u32 = 1;

impl ClientWindow {
    /// A client first seen at `now_ms`.
    pub const fn new(now_ms: i64) -> ClientWindow {
        ClientWindow { period_start: now_ms, minute: i64::MIN, minute_count: 0, _pad: 0, current: Period::EMPTY, previous: Period::EMPTY }
    }

    /// Move the periods on to `now_ms`.
    fn slide(&mut self, now_ms: i64, window_ms: i64) {
        let window_ms = window_ms.max(1);
        let since = now_ms.saturating_sub(self.period_start);
        if since < 0 {
            // the wall clock stepped back: the period starts again now, so that it keeps
            // counting for one window more, not for as long as the step
            self.period_start = now_ms;
            return;
        }
        if since < window_ms {
            return;
        }
        if since < 2 * window_ms {
            self.previous = self.current;
            self.period_start += window_ms;
        } else {
            self.previous = Period::EMPTY;
            self.period_start = now_ms;
        }
        self.current = Period::EMPTY;
    }

    /// Count one request.
    pub fn count(&mut self, seen: &Seen, window_ms: i64) {
        self.slide(seen.now_ms, window_ms);
        let p = &mut self.current;
        p.requests = p.requests.saturating_add(1);
        p.auth += u32::from(seen.auth);
        p.declared += u32::from(seen.declared);
        p.contact += u32::from(seen.contact);
        p.disallowed += u32::from(seen.disallowed);
        p.fetched |= u32::from(seen.robots) | (u32::from(seen.sitemap) << 1);
        p.paths_set += u32::from(p.paths.insert(seen.path));
        // the decays' coin: the request's own hashes and the client's count
        let random = mix(seen.path ^ seen.family.rotate_left(17) ^ u64::from(p.requests));
        count_in(&mut p.top_paths, counter_key(seen.path), random);
        count_in(&mut p.families, counter_key(seen.family), random.rotate_left(21));
        if let Some(session) = seen.session {
            let address = counter_key(seen.address);
            if let Some(c) = hold_first(&mut p.sessions, counter_key(session)) {
                // the address word: the first address (31 bits) above the cross-address bit
                if c.count == 1 {
                    c.address = address << 1;
                } else if c.address >> 1 != (address << 1) >> 1 {
                    c.address |= CROSS_ADDRESS;
                }
            }
        }
        let minute = seen.now_ms.div_euclid(60_000);
        if minute != self.minute {
            self.minute = minute;
            self.minute_count = 0;
        }
        self.minute_count = self.minute_count.saturating_add(1);
        p.peak_minute = p.peak_minute.max(self.minute_count);
    }

    /// The share of the previous period still inside the window at `now_ms`.
    pub fn previous_weight(&self, now_ms: i64, window_ms: i64) -> f64 {
        let window_ms = window_ms.max(1);
        let into = (now_ms - self.period_start).clamp(0, window_ms);
        1.0 - into as f64 / window_ms as f64
    }

    /// The classifier's input for this client at `now_ms` (after [`Self::count`] of its
    /// latest request), and the rules it honours with `per_minute` the
    /// crawl-delay's rate (None: robots.txt sets no Crawl-delay).
    pub fn observed(&self, now_ms: i64, window_ms: i64, per_minute: Option<u32>) -> Observed {
        let mut out = Observed::default();
        self.observed_into(now_ms, window_ms, per_minute, &mut out);
        out
    }

    /// [`Self::observed`] into `out`, whose list of path hits keeps its
    /// allocation: the module scores every request with one per worker.
    pub fn observed_into(&self, now_ms: i64, window_ms: i64, per_minute: Option<u32>, out: &mut Observed) {
        // a copy moved on only when a period ended since the last request
        let moved;
        let w = if now_ms.saturating_sub(self.period_start) < window_ms.max(1) {
            self
        } else {
            moved = {
                let mut c = *self;
                c.slide(now_ms, window_ms);
                c
            };
            &moved
        };
        let f = w.previous_weight(now_ms, window_ms);
        let (c, p) = (&w.current, &w.previous);
        let sum = |a: u32, b: u32| f64::from(a) + f * f64::from(b);
        let requests = sum(c.requests, p.requests);
        let unique = c.paths.count_set(c.paths_set) + f * p.paths.count_set(p.paths_set);
        let top_paths = Merged::<{ 2 * TOP_PATHS }>::of(&c.top_paths, &p.top_paths, f);
        let top_family = Merged::<{ 2 * TOP_FAMILIES }>::of(&c.families, &p.families, f).hits().iter().copied().fold(0.0, f64::max);
        let sessions = Merged::<{ 2 * TOP_SESSIONS }>::of(&c.sessions, &p.sessions, f);
        let rules = RuleCounts {
            requests,
            declared: sum(c.declared, p.declared),
            contact: sum(c.contact, p.contact),
            disallowed: sum(c.disallowed, p.disallowed),
            robots: (c.fetched | if f > 0.0 { p.fetched } else { 0 }) & 1 != 0,
            sitemap: (c.fetched | if f > 0.0 { p.fetched } else { 0 }) & 2 != 0,
            peak_minute: c.peak_minute.max(if f > 0.0 { p.peak_minute } else { 0 }),
        };
        let mut top_path_hits = std::mem::take(&mut out.top_path_hits);
        top_path_hits.clear();
        top_path_hits.extend_from_slice(top_paths.hits());
        *out = Observed {
            requests,
            unique_paths: unique.min(requests),
            top_path_hits,
            auth_frac: if requests > 0.0 { sum(c.auth, p.auth) / requests } else { 0.0 },
            top_agent_share: if requests > 0.0 { (top_family / requests).min(1.0) } else { 0.0 },
            sessions: (sessions.len > 0).then(|| Sessions {
                max_requests: sessions.hits().iter().copied().fold(0.0, f64::max),
                count: sessions.len as f64,
                cross_ip: sessions.addresses[..sessions.len].iter().filter(|a| *a & CROSS_ADDRESS != 0).count() as f64,
            }),
            rules_honoured: honoured_count(&rules, per_minute) as f64,
        };
    }
}

/// The counters of both periods by key, the previous one's weighted: at most
/// `N`, twice a table's counters, on the stack.
struct Merged<const N: usize> {
    keys: [u32; N],
    hits: [f64; N],
    /// The address word of a session: its first address and the cross-address bit.
    addresses: [u32; N],
    len: usize,
}

impl<const N: usize> Merged<N> {
    #[inline]
    fn of(current: &[Counter], previous: &[Counter], weight: f64) -> Merged<N> {
        let mut m = Merged { keys: [0; N], hits: [0.0; N], addresses: [0; N], len: 0 };
        for x in current.iter().filter(|x| x.key != 0).take(N) {
            (m.keys[m.len], m.hits[m.len], m.addresses[m.len]) = (x.key, f64::from(x.count), x.address);
            m.len += 1;
        }
        if weight <= 0.0 {
            return m;
        }
        for x in previous.iter().filter(|x| x.key != 0) {
            let hits = weight * f64::from(x.count);
            match m.keys[..m.len].iter().position(|k| *k == x.key) {
                Some(i) => {
                    m.hits[i] += hits;
                    if m.addresses[i] >> 1 != x.address >> 1 {
                        m.addresses[i] |= CROSS_ADDRESS;
                    }
                    m.addresses[i] |= x.address & CROSS_ADDRESS;
                }
                None if m.len < N => {
                    (m.keys[m.len], m.hits[m.len], m.addresses[m.len]) = (x.key, hits, x.address);
                    m.len += 1;
                }
                None => {}
            }
        }
        m
    }

    fn hits(&self) -> &[f64] {
        &self.hits[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::{score, Placement, Settings};

    /// The difference FxHash's multiply keeps: the top bit of one word, and
    /// bit 4 of the next (after its rotation). Under every seed those two
    /// User-Agents collided, so a client could take another's memo slot.
    #[test]
    fn a_top_bit_difference_cancelled_by_the_next_word_is_no_collision() {
        let ua = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36".to_vec();
        for word in 0..4 {
            let mut x = ua.clone();
            x[8 * word + 7] ^= 0x80;
            x[8 * word + 8] ^= 0x10;
            for seed in [1, 42, u64::MAX, 0x7561_2d74_7261_6974] {
                assert_ne!(hash_bytes(seed, &ua), hash_bytes(seed, &x), "word {word}, seed {seed}");
            }
        }
        // and the hash is a function of the seed and every byte
        assert_eq!(hash_bytes(7, &ua), hash_bytes(7, &ua));
        assert_ne!(hash_bytes(7, &ua), hash_bytes(8, &ua));
        assert_ne!(hash_bytes(7, b"ab"), hash_bytes(7, b"ab\0"), "the length counts");
        // a first word that makes up for another length, which the starting state alone let through
        for seed in [1, 42, u64::MAX] {
            assert_ne!(hash_bytes(seed, b"Mozilla/"), hash_bytes(seed, b"Lozilla/\0"), "seed {seed}");
        }
    }

    /// One row of the proportional classifier's table, as the traffic that makes it.
    struct Row {
        name: &'static str,
        requests: u32,
        unique: u32,
        top: Vec<u32>,
        auth: f64,
        /// Percent of requests per User-Agent family.
        agents: Vec<u32>,
        /// (requests, addresses) per session.
        sessions: Vec<(u32, u32)>,
        honoured: usize,
        score: f64,
        placement: Placement,
    }

    fn seed_rows() -> Vec<Row> {
        let row = |name, requests, unique, top: Vec<u32>, auth, agents: Vec<u32>, sessions: Vec<(u32, u32)>, honoured, score, placement| Row {
            name,
            requests,
            unique,
            top,
            auth,
            agents,
            sessions,
            honoured,
            score,
            placement,
        };
        let mut flash = vec![210_000, 180_000];
        flash.extend([9000; 9]);
        vec![
            row("partner-price-feed", 8640, 14, vec![4200, 3100, 1340], 0.0, vec![100], vec![(8640, 1)], 4, 0.09, Placement::Rung(0)),
            row("verified-search-crawler", 41200, 41200, vec![1; 12], 0.0, vec![100], vec![(2600, 1); 4], 4, 0.59, Placement::Rung(3)),
            row("academic-longitudinal-study", 2600, 310, vec![900, 880, 620, 200], 0.0, vec![100], vec![(2600, 1)], 3, 0.09, Placement::Rung(0)),
            row("seo-audit-crawler", 18400, 18100, vec![1; 12], 0.0, vec![34, 33, 33], vec![(4600, 6); 3], 2, 0.68, Placement::Rung(4)),
            row("personal-archiver", 740, 740, vec![1; 12], 0.0, vec![100], vec![(740, 1)], 2, 0.42, Placement::Rung(2)),
            row("flash-sale-monitor", 612_000, 9400, flash, 0.02, vec![61, 20, 11, 8], vec![(204_000, 74); 3], 0, 0.61, Placement::Rung(4)),
            row("resale-listing-republisher", 94000, 91200, vec![1; 12], 0.0, vec![44, 25, 20, 11], vec![(23500, 22); 4], 1, 0.90, Placement::Rung(6)),
            row("credential-stuffing", 148_000, 26, vec![121_000, 21000, 6000], 1.0, vec![100], vec![(3700, 210); 40], 0, 0.45, Placement::Routed),
        ]
    }

    /// A fixed permutation of 0..n (a multiplicative step coprime to n).
    fn shuffled(n: usize) -> Vec<usize> {
        let mut step = (n as f64 * 0.618_034) as usize | 1;
        while gcd(step, n) != 1 {
            step += 2;
        }
        (0..n).map(|i| (i * step + 7) % n).collect()
    }

    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    /// The row's requests, in the order they arrive over `span_ms`.
    fn stream(r: &Row, span_ms: i64) -> Vec<Seen> {
        let n = r.requests as usize;
        // paths: the busiest with their hits (scaled down when the row's distinct paths need
        // more requests than it has left), then the rest spread over the other paths
        let tail_unique = (r.unique as usize).saturating_sub(r.top.len());
        let top_sum: usize = r.top.iter().map(|&h| h as usize).sum();
        let scale = if n - top_sum.min(n) < tail_unique { (n - tail_unique) as f64 / top_sum as f64 } else { 1.0 };
        let mut paths: Vec<u64> = Vec::with_capacity(n);
        for (i, &h) in r.top.iter().enumerate() {
            let hits = ((f64::from(h) * scale).round() as usize).max(1);
            paths.extend(std::iter::repeat_n(i as u64, hits));
        }
        let tail = n.saturating_sub(paths.len());
        for k in 0..tail {
            paths.push(1000 + (k % tail_unique.max(1)) as u64);
        }
        paths.truncate(n);
        let order = shuffled(n);
        let mut agent_of = Vec::with_capacity(n);
        for (a, pct) in r.agents.iter().enumerate() {
            agent_of.extend(std::iter::repeat_n(a as u64, (*pct as usize * n).div_ceil(100)));
        }
        let mut session_of: Vec<Option<(u64, u32)>> = Vec::with_capacity(n);
        for (s, (req, ips)) in r.sessions.iter().enumerate() {
            session_of.extend((0..*req).map(|k| Some((s as u64, k % ips))));
        }
        session_of.resize(n, None);
        let auth = (r.auth * n as f64).round() as usize;
        let rules = r.honoured;
        (0..n)
            .map(|k| {
                let path = paths[order[k]];
                let session = session_of[shuffled_index(k, n)];
                Seen {
                    now_ms: k as i64 * span_ms / n as i64,
                    path: hash_bytes(1, format!("/{}/{path}", r.name).as_bytes()),
                    family: hash_bytes(2, &agent_of[k * agent_of.len() / n].to_le_bytes()),
                    session: session.map(|(s, _)| hash_bytes(3, format!("{}-{s}", r.name).as_bytes())),
                    address: hash_bytes(4, &session.map_or(0, |(s, ip)| s * 1000 + u64::from(ip)).to_le_bytes()),
                    auth: k < auth,
                    robots: k == 0 && rules >= 2,
                    sitemap: k == 1 && rules >= 3,
                    disallowed: false,
                    declared: rules >= 1,
                    contact: rules >= 4,
                }
            })
            .collect()
    }

    fn shuffled_index(k: usize, n: usize) -> usize {
        (k * 7919) % n
    }

    #[test]
    fn the_seed_clients_streamed_score_as_the_table_says() {
        let s = Settings::default();
        let day: i64 = 86_400_000;
        for r in seed_rows() {
            let seen = stream(&r, day - 1);
            let mut w = ClientWindow::new(0);
            for x in &seen {
                w.count(x, day);
            }
            let last = seen.last().unwrap().now_ms;
            let o = w.observed(last, day, None);
            let sc = score(&o, &s);
            assert!((sc.score - r.score).abs() <= 0.02, "{}: score {:.3}, the table says {:.2} ({o:?})", r.name, sc.score, r.score);
            assert_eq!(sc.placement, r.placement, "{}: {:.3} {o:?}", r.name, sc.score);
        }
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn a_url_is_its_path_and_its_query() {
        let seed = 0x1234_5678;
        assert_eq!(url_hash(seed, b"/list", b""), hash_bytes(seed, b"/list"), "no query: the path");
        assert_ne!(url_hash(seed, b"/list", b"page=1"), url_hash(seed, b"/list", b"page=2"), "each page of a list");
        assert_ne!(url_hash(seed, b"/list", b"page=1"), url_hash(seed, b"/list", b""));
        assert_ne!(url_hash(seed, b"/list", b"a"), url_hash(seed, b"/lis", b"ta"), "the boundary counts");
        assert_ne!(url_hash(seed, b"/list", b"page=1"), url_hash(seed ^ 1, b"/list", b"page=1"), "keyed by the seed");
    }

    fn seen(now_ms: i64, path: u64) -> Seen {
        Seen { now_ms, path: mix(path + 1), family: 7, ..Seen::default() }
    }

    #[test]
    fn the_earlier_period_counts_for_the_part_still_in_the_window() {
        let minute = 60_000;
        let mut w = ClientWindow::new(0);
        for k in 0..100 {
            w.count(&seen(k * 500, k as u64), minute);
        }
        assert_eq!(w.observed(59_999, minute, None).requests, 100.0);
        // a quarter into the next period: three quarters of the first still count
        w.count(&seen(75_000, 1000), minute);
        let o = w.observed(75_000, minute, None);
        assert_eq!(o.requests, 1.0 + 75.0);
        // two windows on, nothing is left but the new request
        w.count(&seen(200_000, 1001), minute);
        assert_eq!(w.observed(200_000, minute, None).requests, 1.0);
        assert_eq!(w.observed(200_000, minute, None).unique_paths, 1.0);
    }

    /// nginx's cached wall clock can step back (an NTP correction): the
    /// period then starts again, and a client that keeps a gentle pace is
    /// not counted as if every request since fell in one period.
    #[test]
    fn a_clock_stepped_back_starts_the_period_again() {
        let minute = 60_000;
        let mut w = ClientWindow::new(600_000);
        for k in 0..5 {
            w.count(&seen(600_000 + k, k as u64), minute);
        }
        // ten minutes back, then one request a minute
        for k in 0..5 {
            w.count(&seen(k * minute, 10 + k as u64), minute);
        }
        let o = w.observed(4 * minute, minute, None);
        assert!(o.requests <= 2.0, "{}", o.requests);
    }

    #[test]
    fn distinct_paths_within_the_sketch_error() {
        for (n, error) in [(10u64, 0.0f64), (100, 0.07), (700, 0.075), (2_000, 0.1), (41_200, 0.2), (200_000, 0.2)] {
            let mut d = Distinct::EMPTY;
            let mut set = 0;
            for i in 0..n {
                let h = hash_bytes(9, format!("/p/{i}").as_bytes());
                set += u32::from(d.insert(h));
                assert!(!d.insert(h), "a hash seen twice sets no new bit");
            }
            assert_eq!(set, d.bitmap.iter().map(|w| w.count_ones()).sum::<u32>(), "the bits counted as they are set");
            // three standard errors
            let count = d.count_set(set);
            let off = (count - n as f64).abs() / n as f64;
            assert!(off <= error.max(0.5 / n as f64), "{n}: {count} ({off:.3})");
        }
    }

    #[test]
    fn a_busy_path_is_not_pushed_out_by_paths_seen_once() {
        let mut w = ClientWindow::new(0);
        for k in 0..20_000u64 {
            // one request in ten on /busy, the rest on a new path each
            let path = if k % 10 == 0 { 0 } else { k };
            w.count(&seen(k as i64, path), 86_400_000);
        }
        let o = w.observed(20_000, 86_400_000, None);
        let busiest = o.top_path_hits.iter().copied().fold(0.0, f64::max);
        assert!((1_900.0..=2_000.0).contains(&busiest), "{busiest}");
    }

    #[test]
    fn a_session_from_two_addresses_counts_as_cross_address() {
        let mut w = ClientWindow::new(0);
        for k in 0..10 {
            let mut s = seen(k, k as u64);
            s.session = Some(77);
            s.address = if k < 5 { 1 << 40 } else { 2 << 40 };
            w.count(&s, 60_000);
        }
        let o = w.observed(10, 60_000, None).sessions.unwrap();
        assert_eq!((o.max_requests, o.count, o.cross_ip), (10.0, 1.0, 1.0));
    }

    #[test]
    fn the_busiest_paths_stand_out_of_a_long_tail_at_a_small_scale() {
        // the flash-sale monitor at 3,000 requests: its busiest paths' entropy is 2.15 bits
        for seed in 0..40u64 {
            let mut paths: Vec<u64> = Vec::new();
            paths.extend(std::iter::repeat_n(1, 1029));
            paths.extend(std::iter::repeat_n(2, 882));
            for p in 3..12 {
                paths.extend(std::iter::repeat_n(p, 44));
            }
            paths.extend(std::iter::repeat_n(12, 60));
            for t in 0..600u64 {
                paths.push(100 + t);
                if t < 33 {
                    paths.push(100 + t);
                }
            }
            let mut x = seed + 1;
            for i in (1..paths.len()).rev() {
                x = mix(x);
                paths.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut w = ClientWindow::new(0);
            for (k, p) in paths.iter().enumerate() {
                w.count(&Seen { now_ms: k as i64, path: hash_bytes(seed, &p.to_le_bytes()), family: 1, ..Seen::default() }, 86_400_000);
            }
            let mut top = w.observed(paths.len() as i64, 86_400_000, None).top_path_hits;
            top.sort_by(|a, b| b.total_cmp(a));
            top.truncate(12);
            let h = crate::classifier::concentration(&top);
            assert!((h - 2.15).abs() <= 0.15, "seed {seed}: {h:.2} bits");
        }
    }

    #[test]
    fn a_client_costs_a_fixed_number_of_bytes() {
        assert_eq!(std::mem::size_of::<ClientWindow>(), 24 + 2 * std::mem::size_of::<Period>());
        assert_eq!(std::mem::size_of::<Period>(), 32 + BITMAP_BITS / 8 + REGISTERS / 2 + 12 * (TOP_PATHS + TOP_FAMILIES + TOP_SESSIONS));
    }
}
