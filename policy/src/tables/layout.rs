//! What a table in a shared zone starts with, so that a zone kept across a
//! reload is read only by code that laid it out the same way: a module
//! built from other sources (an upgrade loaded from another path) finds
//! the previous zone of the same name and kind, and starts a fresh table
//! instead of reading shifted memory.

use std::fmt;

/// "crawlwrd" in memory: a crawlward table, whatever its kind or version.
pub const MAGIC: u64 = u64::from_le_bytes(*b"crawlwrd");

/// The kinds of crawlward zones, one per directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    Counters = 1,
    DnsCache = 2,
    Budgets = 3,
    Ladder = 4,
    Replay = 5,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Counters, Kind::DnsCache, Kind::Budgets, Kind::Ladder, Kind::Replay];

    /// The directive that declares a zone of this kind.
    pub fn directive(self) -> &'static str {
        match self {
            Kind::Counters => "crawlward_zone",
            Kind::DnsCache => "crawlward_dns_cache",
            Kind::Budgets => "crawlward_budget_zone",
            Kind::Ladder => "crawlward_ladder",
            Kind::Replay => "crawlward_signatures",
        }
    }

    fn of(n: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u32 == n)
    }
}

/// The first bytes of every crawlward table: its kind, the version of its
/// layout (bumped when a field changes meaning without changing a size),
/// and the sizes of its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Fingerprint {
    pub magic: u64,
    pub kind: u32,
    pub version: u32,
    pub root: u32,
    pub header: u32,
    pub entry: u32,
    /// What the table holds beyond its layout, 0 for nothing: a budget zone's
    /// catalogue (its fixed slots), so that another catalogue lays it out again.
    pub contents: u32,
}

/// The top four bits of every tag: on 64-bit Linux, user space ends at
/// 2^47 (2^52 with 5-level pages), so a tag is never the address of
/// another module's tag.
const TAG_MARK: u64 = 0xC << 60;

impl Fingerprint {
    pub const fn new(kind: Kind, version: u32, root: usize, header: usize, entry: usize) -> Fingerprint {
        Fingerprint { magic: MAGIC, kind: kind as u32, version, root: root as u32, header: header as u32, entry: entry as u32, contents: 0 }
    }

    /// Whether `other` lays the table out the same way (whatever it holds).
    pub fn same_layout(&self, other: &Fingerprint) -> bool {
        Fingerprint { contents: 0, ..*self } == Fingerprint { contents: 0, ..*other }
    }

    /// The directive that declares a zone of this layout.
    pub fn directive(&self) -> &'static str {
        Kind::of(self.kind).map_or("crawlward", Kind::directive)
    }

    /// The zone's tag for nginx, which reuses a zone across a reload only
    /// when its name, size and tag are the same: the fingerprint packed into
    /// a value that is never an address. So nginx hands a kept zone only to
    /// a module that lays it out the same way, and frees one it cannot.
    pub const fn tag(&self) -> u64 {
        TAG_MARK
            | (self.kind as u64 & 0xf) << 56
            | (self.version as u64 & 0xff) << 48
            | (self.root as u64 & 0xffff) << 32
            | (self.header as u64 & 0xffff) << 16
            | (self.entry as u64 & 0xffff)
    }
}

/// The kind of crawlward zone a tag stands for; None for another module's tag.
pub fn kind_of_tag(tag: u64) -> Option<Kind> {
    if tag & (0xf << 60) != TAG_MARK {
        return None;
    }
    Kind::of(((tag >> 56) & 0xf) as u32)
}

/// How a zone's existing table fits the layout this module wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Same kind and layout: keep it.
    Same,
    /// Not a crawlward fingerprint: a module from before fingerprints.
    Unknown,
    /// A table of another kind (the name was another directive's).
    OtherKind(Kind),
    /// The same kind, laid out otherwise (another build of the module).
    OtherLayout(Fingerprint),
}

/// Compares what a zone holds with what this module lays out.
pub fn fit(found: &Fingerprint, want: &Fingerprint) -> Fit {
    if found.magic != MAGIC {
        return Fit::Unknown;
    }
    if found.kind != want.kind {
        return Kind::of(found.kind).map_or(Fit::Unknown, Fit::OtherKind);
    }
    if found.same_layout(want) {
        Fit::Same
    } else {
        Fit::OtherLayout(*found)
    }
}

/// What the notice says about a table that does not fit.
impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fit::Same => f.write_str("the same layout"),
            Fit::Unknown => f.write_str("a layout of an older module"),
            Fit::OtherKind(k) => write!(f, "a \"{}\" zone", k.directive()),
            Fit::OtherLayout(p) => write!(f, "layout version {} (root {}, header {}, entry {} bytes)", p.version, p.root, p.header, p.entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGETS: Fingerprint = Fingerprint::new(Kind::Budgets, 1, 64, 40, 108);

    #[test]
    fn the_same_layout_is_kept() {
        assert_eq!(fit(&BUDGETS, &BUDGETS), Fit::Same);
        // other contents (a budget zone's catalogue) in the same layout: the module lays
        // the table out again where it is, no fresh zone
        let other = Fingerprint { contents: 7, ..BUDGETS };
        assert_eq!(fit(&other, &BUDGETS), Fit::Same);
        assert!(other.same_layout(&BUDGETS) && other != BUDGETS);
    }

    #[test]
    fn any_difference_starts_afresh() {
        let mut changed = Vec::new();
        for f in
            [|p: &mut Fingerprint| p.version += 1, |p: &mut Fingerprint| p.root += 8, |p: &mut Fingerprint| p.header += 8, |p: &mut Fingerprint| p.entry -= 4]
        {
            let mut old = BUDGETS;
            f(&mut old);
            changed.push(fit(&old, &BUDGETS));
        }
        assert!(changed.iter().all(|c| matches!(c, Fit::OtherLayout(_))), "{changed:?}");
        let mut old = BUDGETS;
        old.entry = 96;
        assert_eq!(fit(&old, &BUDGETS).to_string(), "layout version 1 (root 64, header 40, entry 96 bytes)");
    }

    #[test]
    fn another_kind_or_an_older_module() {
        let counters = Fingerprint::new(Kind::Counters, 1, 64, 64, 520);
        assert_eq!(fit(&counters, &BUDGETS), Fit::OtherKind(Kind::Counters));
        assert_eq!(fit(&counters, &BUDGETS).to_string(), "a \"crawlward_zone\" zone");
        // the counters zone of the module before fingerprints began with this magic
        let older = Fingerprint { magic: 0x6377_6172_645f_0001 ^ (232 << 32), ..counters };
        assert_eq!(fit(&older, &BUDGETS), Fit::Unknown);
        let future = Fingerprint { kind: 9, ..BUDGETS };
        assert_eq!(fit(&future, &BUDGETS), Fit::Unknown);
        assert_eq!(std::mem::size_of::<Fingerprint>(), 32);
    }

    #[test]
    fn tags_tell_layouts_apart() {
        let mut tags = vec![BUDGETS.tag()];
        for f in [
            |p: &mut Fingerprint| p.kind = Kind::Counters as u32,
            |p: &mut Fingerprint| p.version += 1,
            |p: &mut Fingerprint| p.root += 8,
            |p: &mut Fingerprint| p.header += 8,
            |p: &mut Fingerprint| p.entry -= 4,
        ] {
            let mut other = BUDGETS;
            f(&mut other);
            tags.push(other.tag());
        }
        let mut unique = tags.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), tags.len(), "{tags:x?}");
        // never a user-space address
        assert!(tags.iter().all(|t| *t >= 1 << 63));
        assert_eq!(kind_of_tag(BUDGETS.tag()), Some(Kind::Budgets));
        assert_eq!(kind_of_tag(Fingerprint::new(Kind::DnsCache, 1, 1, 1, 1).tag()), Some(Kind::DnsCache));
        // another module's tag: the address of its module structure
        assert_eq!(kind_of_tag(0x7f12_3456_7890), None);
        assert_eq!(kind_of_tag(0), None);
    }
}
