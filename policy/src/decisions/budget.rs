//! Crawl budgets (the forge's crawl-budget review): three budgets per counted
//! request, per client address (IPv6 by its /64), per agent name (a second
//! cap only) and one shared ceiling, each with a general limit and a tighter
//! one for deep paths. All must have room; a refused request spends nothing.
//!
//! Windows slide: the count over the last window is estimated from the
//! current fixed window and the previous one, weighted by how much of the
//! previous one still lies inside the sliding window. A burst straddling a
//! window boundary is refused as it would be anywhere else, with O(1) state
//! per key, for windows of a second to a day. The estimate takes the
//! previous window's requests as spread evenly over it, so a budget spent in
//! one burst has room again up to half a window later than an exact count
//! would give (a daily quota spent at midnight: at noon the next day).
//!
//! Plain `repr(C)` data and pure functions: the module keeps the windows in
//! shared memory and calls these under the zone's lock; `crawlward explain`
//! reports the same arithmetic.

use std::net::IpAddr;

/// A limit: `limit` requests per `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub limit: u32,
    pub window_ms: u64,
}

impl Rate {
    /// `60r/m`, `6r/m`, `1000r/h`, `20000r/d`, `5r/s`.
    pub fn parse(s: &str) -> Option<Rate> {
        let (n, unit) = s.split_once("r/")?;
        let limit: u32 = n.parse().ok().filter(|n| *n >= 1)?;
        let window_ms = match unit {
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return None,
        };
        Some(Rate { limit, window_ms })
    }

    /// The limit while the worker runs late: divided by `shrink`, at least 1.
    pub fn shrunk(self, shrink: u32) -> Rate {
        Rate { limit: (self.limit / shrink.max(1)).max(1), ..self }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.window_ms {
            1000 => "s",
            60_000 => "m",
            3_600_000 => "h",
            _ => "d",
        };
        write!(f, "{}r/{unit}", self.limit)
    }
}

/// A budget's two limits: every counted request, and deep paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub general: Rate,
    pub deep: Rate,
}

impl Limits {
    /// Never refuses (every count fits in a u32 window).
    const UNLIMITED: Limits = Limits { general: Rate { limit: u32::MAX, window_ms: 60_000 }, deep: Rate { limit: u32::MAX, window_ms: 60_000 } };

    const fn per_minute(general: u32, deep: u32) -> Limits {
        Limits { general: Rate { limit: general, window_ms: 60_000 }, deep: Rate { limit: deep, window_ms: 60_000 } }
    }

    /// `60r/m,6r/m`: general, then deep.
    pub fn parse(s: &str) -> Option<Limits> {
        let (g, d) = s.split_once(',')?;
        let (general, deep) = (Rate::parse(g)?, Rate::parse(d)?);
        Some(Limits { general, deep })
    }
}

/// One sliding window's state.
///
/// With budget sync (several nginx nodes sharing one budget through a store),
/// a window also holds the other nodes' requests in its current and previous
/// fixed windows, as last read from the store, and how many of its own it has
/// added to the store: the estimate is then the cluster's (ingress-nginx's
/// global throttle's approximate sliding window: local counts plus the last
/// known counts of the others). Without sync those stay 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Start of the current fixed window (ms, a multiple of the window's length).
    start: u64,
    cur: u32,
    prev: u32,
    /// The other nodes' requests in the current and previous fixed windows (sync).
    others_cur: u32,
    others_prev: u32,
    /// Of `cur`, the requests already added to the store's count (sync).
    pushed: u32,
    /// The window's length (ms), for the store's keys.
    len_ms: u32,
}

impl Window {
    pub const ZERO: Window = Window { start: 0, cur: 0, prev: 0, others_cur: 0, others_prev: 0, pushed: 0, len_ms: 0 };

    /// Move to the fixed window holding `now`.
    pub(crate) fn roll(&mut self, now: u64, len: u64) {
        self.len_ms = len.min(u32::MAX as u64) as u32;
        let start = now - now % len;
        // the clock stepped back (the wall clock of a synced zone, set back by NTP or a
        // restored VM): the window starts again from now, its counts carried as the previous
        // window's, so that they still weigh for a window and then slide out, instead of
        // piling up in a window that would start only once the clock caught up. A step is
        // the window's start more than a window, and more than a minute, ahead of now: a
        // worker whose cached clock lags a second behind (a busy event loop) is no step,
        // even for a per-second budget, and must not start a window that others fill again
        if self.start > now.saturating_add(len.max(60_000)) {
            self.prev = self.cur;
            self.others_prev = self.others_cur;
            self.cur = 0;
            self.others_cur = 0;
            self.pushed = 0;
            self.start = start;
            return;
        }
        // a worker whose clock is a few ms behind the one that rolled the window
        // counts in the current window: it must not wipe it
        if start <= self.start {
            return;
        }
        let next = start == self.start + len;
        self.prev = if next { self.cur } else { 0 };
        self.others_prev = if next { self.others_cur } else { 0 };
        self.cur = 0;
        self.others_cur = 0;
        self.pushed = 0;
        self.start = start;
    }

    /// Requests over the sliding window ending at `now`, rounded up (a `now`
    /// before the window's start, from a worker whose clock is behind, counts
    /// as its start); the other nodes' too when `cluster`.
    pub(crate) fn estimate(&self, now: u64, len: u64, cluster: bool) -> u64 {
        let (prev, cur) = self.totals(cluster);
        let elapsed = now.saturating_sub(self.start).min(len);
        (prev * (len - elapsed)).div_ceil(len) + cur
    }

    /// The previous and current fixed windows' counts: this node's, and the
    /// other nodes' when `cluster`.
    fn totals(&self, cluster: bool) -> (u64, u64) {
        let others = cluster as u64;
        (self.prev as u64 + others * self.others_prev as u64, self.cur as u64 + others * self.others_cur as u64)
    }

    /// Whether one more request fits under `rate` at `now`, else how many
    /// milliseconds until it does.
    pub fn room(&self, now: u64, rate: Rate) -> Result<(), u64> {
        let mut w = *self;
        w.roll(now, rate.window_ms);
        w.room_rolled(now, rate, false)
    }

    /// [`Window::room`] of a window already rolled to `now`.
    pub(crate) fn room_rolled(&self, now: u64, rate: Rate, cluster: bool) -> Result<(), u64> {
        let len = rate.window_ms;
        let limit = rate.limit as u64;
        if self.estimate(now, len, cluster) < limit {
            return Ok(());
        }
        let (prev, cur) = self.totals(cluster);
        let end = self.start + len;
        if cur >= limit {
            // the current window alone is full: room comes once enough of it has slid out,
            // in the next window: cur * (len - e) / len + 1 <= limit
            let e = (len * (cur + 1 - limit)).div_ceil(cur);
            return Err(end - now + e);
        }
        // the previous window's share must shrink: prev * (len - e) / len + cur + 1 <= limit
        let allowed = limit - cur - 1;
        let e = len - (allowed * len) / prev.max(1);
        Err((self.start + e).saturating_sub(now).max(1))
    }

    /// Count one request at `now`.
    pub fn spend(&mut self, now: u64, rate: Rate) {
        self.roll(now, rate.window_ms);
        self.cur = self.cur.saturating_add(1);
    }

    /// Sync: the fixed window's start and length (ms; 0 for a window never used).
    pub fn fixed(&self) -> (u64, u64) {
        (self.start, self.len_ms as u64)
    }

    /// Sync: this node's requests in the current fixed window not yet added to
    /// the store's count, now marked as added; this node's requests in the
    /// store's count once they are; and whether they are the first of this
    /// fixed window (the previous window's count is then read). A delta of 0
    /// when there is nothing new.
    pub fn take_unpushed(&mut self) -> (u32, u32, bool) {
        let delta = self.cur - self.pushed.min(self.cur);
        let first = self.pushed == 0;
        self.pushed = self.cur;
        (delta, self.pushed, first)
    }

    /// Sync: the store counts `total` requests in the fixed window starting at
    /// `start`, `ours` of them this node's: the rest are the other nodes'. A
    /// reply about a window that has since become the previous one counts as
    /// the previous one's. A count below `ours` means the store lost the key
    /// (it restarted, was flushed or evicted it): the other nodes' last known
    /// count no longer holds, and this node's requests it lost are sent again
    /// (true: the key must go back on the sync's queue), so that the store's
    /// count becomes the cluster's again instead of staying below it.
    pub fn learn(&mut self, start: u64, total: i64, ours: u32) -> bool {
        let total = total.max(0) as u64;
        if start == self.start && total < ours as u64 {
            self.others_cur = 0;
            self.pushed = self.pushed.min(total as u32);
            return self.pushed < self.cur;
        }
        let others = total.saturating_sub(ours as u64).min(u32::MAX as u64) as u32;
        if start == self.start {
            self.others_cur = self.others_cur.max(others);
        } else if self.len_ms > 0 && start + self.len_ms as u64 == self.start {
            self.others_prev = self.others_prev.max(others);
        }
        false
    }

    /// Sync: the store counts `total` requests in the fixed window before the
    /// one starting at `start`; those that are not this node's are the others'.
    pub fn learn_prev(&mut self, start: u64, total: i64) {
        if start == self.start {
            self.others_prev = (total.max(0) as u64).saturating_sub(self.prev as u64).min(u32::MAX as u64) as u32;
        }
    }
}

/// The budgets, in the order they are reported: the three that count every
/// crawler that is not verified, and the one that counts verified crawlers
/// (per agent name) when the sysadmin sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Address,
    Agent,
    Shared,
    Verified,
}

impl Budget {
    pub const ALL: [Budget; 4] = [Budget::Address, Budget::Agent, Budget::Shared, Budget::Verified];

    pub fn as_str(self) -> &'static str {
        match self {
            Budget::Address => "address",
            Budget::Agent => "agent",
            Budget::Shared => "shared",
            Budget::Verified => "verified",
        }
    }

    /// Its place in [`Budget::ALL`] (and in the counters kept in that order).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why a request was refused: the budget, whether its deep limit, and when it has room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub budget: Budget,
    pub deep: bool,
    /// Milliseconds until that budget has room for this request.
    pub retry_after_ms: u64,
}

impl Refusal {
    /// The budget's name, with `-deep` for its deep limit (`$crawlward_budget`).
    pub fn name(&self) -> &'static str {
        match (self.budget, self.deep) {
            (Budget::Address, false) => "address",
            (Budget::Address, true) => "address-deep",
            (Budget::Agent, false) => "agent",
            (Budget::Agent, true) => "agent-deep",
            (Budget::Shared, false) => "shared",
            (Budget::Shared, true) => "shared-deep",
            (Budget::Verified, false) => "verified",
            (Budget::Verified, true) => "verified-deep",
        }
    }

    /// Retry-After in whole seconds, rounded up, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after_ms.div_ceil(1000).max(1)
    }
}

/// The limits of the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub address: Limits,
    pub agent: Limits,
    pub shared: Limits,
    /// Verified crawlers, per agent name: None (the default) leaves them out
    /// of every budget, so that a verified search crawler is slowed only by
    /// a limit written for it (Google's crawler documentation).
    pub verified: Option<Limits>,
    /// When the verified budget ends (seconds since the epoch): a slowdown
    /// used on purpose is meant "for a short time, a few hours or one to two
    /// days" (Google's crawler documentation). None: it does not end.
    pub verified_until_s: Option<i64>,
}

impl BudgetLimits {
    /// The forge's crawl-budget review's budgets: per address 60 a minute and 6 on
    /// deep paths, per agent 120 and 12, all crawlers together 240 and 24;
    /// verified crawlers not counted.
    pub const SEED_003: BudgetLimits = BudgetLimits {
        address: Limits::per_minute(60, 6),
        agent: Limits::per_minute(120, 12),
        shared: Limits::per_minute(240, 24),
        verified: None,
        verified_until_s: None,
    };

    /// Whether verified crawlers are counted at `now_s`: a verified budget is
    /// set and its end, if it has one, is still ahead.
    pub fn verified_counts(&self, now_s: i64) -> bool {
        self.verified.is_some() && self.verified_until_s.is_none_or(|until| now_s < until)
    }

    /// The limits of budget `b` (a verified budget that is not set never refuses).
    pub fn of(&self, b: Budget) -> Limits {
        match b {
            Budget::Address => self.address,
            Budget::Agent => self.agent,
            Budget::Shared => self.shared,
            Budget::Verified => self.verified.unwrap_or(Limits::UNLIMITED),
        }
    }
}

/// The windows of one key: every counted request, and deep paths.
pub type Windows = [Window; 2];

/// Check the budgets given (for a crawler: address, agent, shared; for a
/// spoofed claim its address only; for a verified crawler its agent's
/// verified budget) for one request and spend in all of them only if all
/// have room. Deep requests count in both the general and the deep limit.
/// `shrink` divides every limit (1: none). With `cluster`, the other nodes'
/// last known counts count too (budget sync, the store reachable).
pub fn take_some(windows: &mut [(Budget, &mut Windows)], deep: bool, now: u64, limits: &BudgetLimits, shrink: u32, cluster: bool) -> Result<(), Refusal> {
    // rolling a window to `now` changes no count, so it is done in place, once
    let used = if deep { 2 } else { 1 };
    for (b, w) in windows.iter_mut() {
        let l = limits.of(*b);
        for (k, rate) in [l.general, l.deep].into_iter().take(used).enumerate() {
            let rate = rate.shrunk(shrink);
            w[k].roll(now, rate.window_ms);
            if let Err(ms) = w[k].room_rolled(now, rate, cluster) {
                return Err(Refusal { budget: *b, deep: k == 1, retry_after_ms: ms });
            }
        }
    }
    for (_, w) in windows.iter_mut() {
        for win in w.iter_mut().take(used) {
            win.cur = win.cur.saturating_add(1);
        }
    }
    Ok(())
}

/// Which of the budgets given, in [`take_some`]'s order, refuses first a
/// client that speeds up from nothing: the smallest limit per time, the
/// general limit and, on a deep path, the deep one; on a tie the one
/// [`take_some`] checks first. (`crawlward explain` says this.)
pub fn first_to_refuse(limits: &BudgetLimits, budgets: &[Budget], deep: bool) -> Option<(Refusal, Rate)> {
    let used = if deep { 2 } else { 1 };
    let mut first: Option<(Refusal, Rate)> = None;
    for b in budgets {
        let l = limits.of(*b);
        for (k, rate) in [l.general, l.deep].into_iter().take(used).enumerate() {
            // a slower rate than the first so far: limit / window smaller
            let slower = first.is_none_or(|(_, f)| (rate.limit as u128 * f.window_ms as u128) < (f.limit as u128 * rate.window_ms as u128));
            if slower {
                first = Some((Refusal { budget: *b, deep: k == 1, retry_after_ms: 0 }, rate));
            }
        }
    }
    first
}

/// The event loop's lag as the forge's crawl-budget review reads it ("while the event loop averages
/// more than 50 ms late"): how late a periodic tick fires, averaged over the
/// last second of ticks, and nothing during a worker's first seconds, when
/// starting up (or a reload's new workers loading) makes the first ticks late
/// for reasons that say nothing about load. One late tick alone does not
/// shrink the budgets: it has to be late by the threshold times the ticks in
/// a second (a 50 ms threshold: half a second of lateness within a second).
#[derive(Debug, Clone, Copy, Default)]
pub struct LagMeter {
    late_ms: [u32; LagMeter::WINDOW],
    ticks: u32,
}

impl LagMeter {
    /// The tick's period (ms).
    pub const TICK_MS: u64 = 100;
    /// Ticks averaged: a second.
    const WINDOW: usize = 10;
    /// Ticks ignored after the worker starts: three seconds.
    const WARMUP: u32 = 30;

    /// Record a tick that fired `late_ms` after it was due.
    pub fn record(&mut self, late_ms: u64) {
        self.late_ms[self.ticks as usize % Self::WINDOW] = late_ms.min(u32::MAX as u64) as u32;
        self.ticks = self.ticks.saturating_add(1);
    }

    /// The average lateness over the last second (ms); 0 while warming up.
    pub fn average_ms(&self) -> u64 {
        if self.ticks <= Self::WARMUP {
            return 0;
        }
        self.late_ms.iter().map(|l| *l as u64).sum::<u64>() / Self::WINDOW as u64
    }
}

/// Whether the crawl budgets count a request: a GET or HEAD from a crawler (a
/// named agent, or no User-Agent), on neither robots.txt (always answered)
/// nor a machine door (its rate class limits it), and, from a verified
/// crawler, only when a `verified` budget is set. Signed-in requests are
/// left out by the caller.
pub fn counted(get_or_head: bool, door: crate::Door, verdict: crate::Verdict, verified_budget: bool) -> bool {
    get_or_head && door == crate::Door::None && verdict.is_crawler() && (verdict != crate::Verdict::Verified || verified_budget)
}

/// The address the address budget counts: an IPv4 address, or an IPv6 address's /64
/// (one subscriber's network); IPv4-mapped addresses are IPv4.
pub fn counted_address(ip: IpAddr) -> [u8; 16] {
    match crate::net::canonical_ip(ip) {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[8..].fill(0);
            o
        }
    }
}

/// How a request's claim stands, for the agent budget's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Verified, or an agent with no means of verification: its own name.
    Agent,
    /// An agent that can be verified (ranges or hostname suffixes) but was
    /// not (DNS unresolved): `<name> (unverified)`.
    Unverified,
    /// Found spoofed: `<name> (spoofed)`.
    Spoofed,
}

/// The name of a catalogue agent's budget slot under a claim, written into
/// `out` (at most `out.len()` bytes; the length is returned). A claim that is
/// not verified although it could be counts apart from the agent it claims
/// (`Googlebot (unverified)`), so impostors cannot spend the real agent's
/// budget. (Bots the catalogue does not name are counted by their product
/// token: [`crate::detector::Bot`].)
pub fn agent_budget_name(agent: &str, claim: Claim, out: &mut [u8]) -> usize {
    let name = agent.as_bytes();
    let suffix: &[u8] = match claim {
        Claim::Agent => b"",
        Claim::Unverified => b" (unverified)",
        Claim::Spoofed => b" (spoofed)",
    };
    let mut n = 0;
    for b in name.iter().chain(suffix) {
        if n == out.len() {
            break;
        }
        out[n] = *b;
        n += 1;
    }
    // never cut a UTF-8 sequence (catalogue names may not be ASCII): back up
    // while the first byte left out continues a character
    let byte = |i: usize| if i < name.len() { name[i] } else { suffix[i - name.len()] };
    while n > 0 && n < name.len() + suffix.len() && (byte(n) & 0xc0) == 0x80 {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    /// What explain says refuses first is what take_some refuses with, for
    /// one client from empty windows: ties, deep limits as tight as general
    /// ones, and each budget lowest in turn.
    #[test]
    fn the_first_to_refuse_is_the_one_take_some_refuses_with() {
        let l = |s: &str| Limits::parse(s).unwrap();
        let crawler = [Budget::Address, Budget::Agent, Budget::Shared];
        for (address, agent, shared) in [
            ("3r/m,2r/m", "60r/m,60r/m", "60r/m,60r/m"),
            ("60r/m,60r/m", "3r/m,2r/m", "60r/m,60r/m"),
            ("60r/m,60r/m", "60r/m,60r/m", "3r/m,2r/m"),
            ("5r/m,5r/m", "3r/m,3r/m", "4r/m,4r/m"),
            ("3r/m,3r/m", "3r/m,3r/m", "3r/m,3r/m"),
            ("4r/m,1r/m", "2r/m,2r/m", "9r/m,9r/m"),
        ] {
            let limits = BudgetLimits { address: l(address), agent: l(agent), shared: l(shared), verified: None, verified_until_s: None };
            for deep in [false, true] {
                let (want, _) = first_to_refuse(&limits, &crawler, deep).unwrap();
                let mut w: [Windows; 3] = [[Window::ZERO; 2]; 3];
                let [a, g, s] = &mut w;
                let mut windows = [(Budget::Address, a), (Budget::Agent, g), (Budget::Shared, s)];
                let got = (0..100).find_map(|_| take_some(&mut windows, deep, 1_000, &limits, 1, false).err()).unwrap();
                assert_eq!((got.budget, got.deep), (want.budget, want.deep), "{address} {agent} {shared}, deep {deep}");
            }
        }
    }

    /// The wall clock set back by half an hour (NTP, a restored VM) under a
    /// synced zone: the window starts again from the new time, its counts
    /// weigh for a window and slide out. It used to keep its start and count
    /// every request in it until the clock caught up, refusing everyone past
    /// the limit for half an hour.
    #[test]
    fn a_clock_set_back_slides_the_counts_out_in_a_window() {
        let rate = Rate { limit: 10, window_ms: 60_000 };
        let (mut w, t0) = (Window::ZERO, 100 * 60_000);
        for _ in 0..6 {
            w.spend(t0, rate);
        }
        let back = t0 - 30 * 60_000;
        assert_eq!(w.estimate(back, 60_000, false), 6, "just after the step, the counts still weigh");
        for _ in 0..4 {
            assert_eq!(w.room(back + 1_000, rate), Ok(()));
            w.spend(back + 1_000, rate);
        }
        assert!(w.room(back + 2_000, rate).is_err(), "the limit still holds");
        let later = back + 2 * 60_000 + 1_000;
        assert_eq!(w.room(later, rate), Ok(()), "two windows on, room again");
        w.spend(later, rate);
        assert_eq!(w.estimate(later, 60_000, false), 1);
        // a worker a few ms behind the one that rolled the window still counts in it
        let mut v = Window::ZERO;
        v.spend(120_001, rate);
        v.spend(119_998, rate);
        assert_eq!(v.estimate(120_001, 60_000, false), 2);
        // and a per-second budget's worker two seconds behind is no step: it counts in the
        // window the others fill
        let per_second = Rate { limit: 10, window_ms: 1_000 };
        let mut s = Window::ZERO;
        for _ in 0..5 {
            s.spend(10_000_500, per_second);
        }
        s.spend(9_998_400, per_second);
        assert_eq!(s.estimate(10_000_600, 1_000, false), 6, "the lagging worker's request counted with the others'");
    }

    #[test]
    fn a_window_whose_store_key_was_lost_forgets_the_others_and_sends_again() {
        let rate = Rate { limit: 10, window_ms: 60_000 };
        let mut w = Window::ZERO;
        for _ in 0..3 {
            w.spend(1_000, rate);
        }
        assert_eq!(w.take_unpushed(), (3, 3, true));
        assert!(!w.learn(0, 8, 3), "8 in the store, 3 of them ours");
        assert_eq!(w.totals(true), (0, 8));
        w.spend(2_000, rate);
        assert_eq!(w.take_unpushed(), (1, 4, false));
        assert!(w.learn(0, 1, 4), "the store has 1 where 4 are ours: it lost the key");
        assert_eq!(w.totals(true), (0, 4), "the others' 5 from before are gone");
        assert_eq!(w.take_unpushed(), (3, 4, false), "the 3 it lost go again");
        assert!(!w.learn(0, 6, 4));
        assert_eq!(w.totals(true), (0, 6), "and the others' new requests count");
    }

    use super::*;

    const MIN: u64 = 60_000;

    fn r(s: &str) -> Rate {
        Rate::parse(s).unwrap()
    }

    #[test]
    fn rates() {
        assert_eq!(r("60r/m"), Rate { limit: 60, window_ms: MIN });
        assert_eq!(r("1000r/h").window_ms, 3_600_000);
        assert_eq!(r("20000r/d").to_string(), "20000r/d");
        for bad in ["0r/m", "r/m", "60/m", "60r/w", "-1r/s", ""] {
            assert_eq!(Rate::parse(bad), None, "{bad}");
        }
        assert_eq!(r("60r/m").shrunk(4).limit, 15);
        assert_eq!(r("3r/m").shrunk(4).limit, 1, "never below one");
        assert_eq!(Limits::parse("60r/m,6r/m").unwrap().deep, r("6r/m"));
    }

    /// Requests allowed by one window, one at each of `times`.
    fn run(times: &[u64], rate: Rate) -> Vec<bool> {
        let mut w = Window::default();
        times
            .iter()
            .map(|t| match w.room(*t, rate) {
                Ok(()) => {
                    w.spend(*t, rate);
                    true
                }
                Err(_) => false,
            })
            .collect()
    }

    #[test]
    fn the_seventh_deep_request_in_a_minute_is_refused() {
        let got = run(&[0, 1000, 2000, 3000, 4000, 5000, 6000], r("6r/m"));
        assert_eq!(got, [true, true, true, true, true, true, false]);
    }

    #[test]
    fn a_burst_straddling_a_window_boundary_is_refused() {
        // 6 at the end of one minute, 6 at the start of the next: a fixed window allows 12
        let mut times: Vec<u64> = (0..6).map(|i| 59_000 + i * 100).collect();
        times.extend((0..6).map(|i| 60_000 + i * 100));
        let got = run(&times, r("6r/m"));
        assert_eq!(got.iter().filter(|a| **a).count(), 6, "{got:?}");
        // a minute after the burst, there is room again
        assert_eq!(run(&[59_000, 59_100, 59_200, 59_300, 59_400, 59_500, 119_600], r("6r/m")).last(), Some(&true));
    }

    #[test]
    fn retry_after_says_when_there_is_room() {
        let rate = r("6r/m");
        let mut w = Window::default();
        for i in 0..6 {
            w.spend(10_000 + i, rate);
        }
        // a worker whose clock is behind, at the next window's start: nothing is wiped
        let mut late = Window::default();
        late.spend(60_005, rate);
        late.spend(59_990, rate);
        assert_eq!((late.start, late.cur), (60_000, 2));
        let wait = w.room(10_006, rate).unwrap_err();
        assert!(w.room(10_006 + wait - 1, rate).is_err() || wait == 1, "not before");
        assert!(w.room(10_006 + wait, rate).is_ok(), "room after {wait} ms");
        assert!(wait <= 60_000 && wait > 49_000, "{wait}");
        // a daily quota spent at once: the estimate takes the previous day's
        // requests as spread over it, so room comes half-way through the next day
        let day = r("2r/d");
        let mut w = Window::default();
        w.spend(0, day);
        w.spend(1, day);
        let wait = w.room(2, day).unwrap_err();
        assert!(w.room(2 + wait - 1, day).is_err(), "not before");
        assert!(w.room(2 + wait, day).is_ok());
        assert_eq!(wait, 86_400_000 + 43_200_000 - 2);
    }

    fn take(windows: [&mut Windows; 3], deep: bool, now: u64, limits: &BudgetLimits, shrink: u32) -> Result<(), Refusal> {
        let [a, g, s] = windows;
        take_some(&mut [(Budget::Address, a), (Budget::Agent, g), (Budget::Shared, s)], deep, now, limits, shrink, false)
    }

    #[test]
    fn three_budgets_all_or_nothing() {
        let limits = BudgetLimits {
            address: Limits::parse("3r/m,2r/m").unwrap(),
            agent: Limits::parse("5r/m,3r/m").unwrap(),
            shared: Limits::parse("10r/m,4r/m").unwrap(),
            verified: None,
            verified_until_s: None,
        };
        let (mut a, mut g, mut s) = (Windows::default(), Windows::default(), Windows::default());
        assert!(take([&mut a, &mut g, &mut s], true, 0, &limits, 1).is_ok());
        assert!(take([&mut a, &mut g, &mut s], true, 1, &limits, 1).is_ok());
        let refused = take([&mut a, &mut g, &mut s], true, 2, &limits, 1).unwrap_err();
        assert_eq!((refused.budget, refused.deep), (Budget::Address, true));
        assert_eq!((g[0].cur, g[1].cur, s[0].cur), (2, 2, 2), "the refusal spent nothing");
        // another address, same agent: the agent's deep cap (3) is next
        let mut a2 = Windows::default();
        assert!(take([&mut a2, &mut g, &mut s], true, 3, &limits, 1).is_ok());
        assert_eq!(take([&mut a2, &mut g, &mut s], true, 4, &limits, 1).unwrap_err().budget, Budget::Agent);
        // shrink by 4 while the worker is late: 3r/m becomes 1
        let mut a3 = Windows::default();
        let mut g3 = Windows::default();
        let mut s3 = Windows::default();
        assert!(take([&mut a3, &mut g3, &mut s3], false, 0, &limits, 4).is_ok());
        assert_eq!(take([&mut a3, &mut g3, &mut s3], false, 1, &limits, 4).unwrap_err().budget, Budget::Address);
    }

    #[test]
    fn lag_is_averaged_over_a_second_after_the_warm_up() {
        let mut m = LagMeter::default();
        // a slow start: the first ticks are very late, and ignored
        for late in [900, 400, 200] {
            m.record(late);
            assert_eq!(m.average_ms(), 0);
        }
        for _ in 0..27 {
            m.record(0);
        }
        assert_eq!(m.average_ms(), 0, "still warming up after 30 ticks");
        m.record(300);
        assert_eq!(m.average_ms(), 30, "one tick 300 ms late: 30 ms on average, under a 50 ms threshold");
        m.record(700);
        assert_eq!(m.average_ms(), 100, "a second stalled: 100 ms");
        for _ in 0..10 {
            m.record(2);
        }
        assert_eq!(m.average_ms(), 2, "a second later, on time again");
        for _ in 0..10 {
            m.record(60);
        }
        assert_eq!(m.average_ms(), 60, "late on every tick");
    }

    #[test]
    fn keys_and_names() {
        let k = |s: &str| counted_address(s.parse().unwrap());
        assert_eq!(k("2001:db8:1:2::1"), k("2001:db8:1:2:ffff::9"), "one /64");
        assert_ne!(k("2001:db8:1:2::1"), k("2001:db8:1:3::1"));
        assert_eq!(k("192.0.2.1"), k("::ffff:192.0.2.1"));
        assert_ne!(k("192.0.2.1"), k("192.0.2.2"));
        let name = |agent: &str, claim: Claim, max: usize| {
            let mut out = vec![0u8; max];
            let n = agent_budget_name(agent, claim, &mut out);
            String::from_utf8(out[..n].to_vec()).unwrap()
        };
        assert_eq!(name("Googlebot", Claim::Spoofed, 46), "Googlebot (spoofed)");
        assert_eq!(name("Googlebot", Claim::Unverified, 46), "Googlebot (unverified)");
        assert_eq!(name("Bot\u{e9}\u{e9}", Claim::Spoofed, 5), "Bot\u{e9}", "cut on a character boundary");
    }
}
