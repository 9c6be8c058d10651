//! Budget sync: several nginx nodes sharing one crawl budget through Valkey
//! or Redis. The module's connection (on nginx's event loop) only moves the
//! bytes; what to send, what the replies mean and when to try again are here.
//!
//! Each node adds its new requests to one key per budget key, window kind
//! and fixed window (`INCRBY`), whose reply is the cluster's count in that
//! window, and sets the key's expiry (`PEXPIREAT` the end of the window after
//! it, when it stops being anyone's previous window); a window's first change
//! also reads the previous window's count. Every node then decides from its own
//! counts plus the others' last known counts (see `budget::Window`).

pub mod resp;

use crate::budget_table::{Change, Table};
use crate::resp::{encode, Reply};

/// Where the store is: `valkey://host:port[/db]` (or `redis://`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    pub host: String,
    pub port: u16,
    pub db: u32,
}

impl StoreUrl {
    pub fn parse(s: &str) -> Result<StoreUrl, &'static str> {
        let rest = s.strip_prefix("valkey://").or_else(|| s.strip_prefix("redis://")).ok_or("expected valkey://host:port[/db]")?;
        let (hostport, db) = match rest.split_once('/') {
            Some((hp, db)) => (hp, db.parse::<u32>().map_err(|_| "expected a database number after the /")?),
            None => (rest, 0),
        };
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => {
                let (h, p) = v6.split_once("]:").ok_or("expected [address]:port")?;
                (h, p)
            }
            None => hostport.rsplit_once(':').ok_or("expected host:port")?,
        };
        let port = port.parse::<u16>().ok().filter(|p| *p > 0).ok_or("expected a port from 1 to 65535")?;
        if host.is_empty() || host.contains('@') {
            return Err("expected a host (credentials are not supported)");
        }
        Ok(StoreUrl { host: host.to_string(), port, db })
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "valkey://{host}:{}/{}", self.port, self.db)
    }
}

/// The most changes sent in one round trip: the store's commands per sync
/// interval stay bounded whatever the traffic (changes past it wait for the
/// next round trip, or their key's eviction).
pub const MAX_CHANGES: usize = 2048;

/// The store's key of a window: `crawlward:<zone>:<key in hex>:<g|d><length
/// in ms>:<window number>`. The key's bytes are hex: an address, or an agent
/// name from the catalogue or a self-declared bot's product token (at most
/// 46 bytes, whatever the client sent), so a key is at most about 160 bytes.
pub fn store_key(zone: &str, key: &[u8], window: usize, len_ms: u64, start: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + zone.len() + 2 * key.len());
    k.extend_from_slice(b"crawlward:");
    k.extend_from_slice(zone.as_bytes());
    k.push(b':');
    for b in key {
        k.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
    }
    k.extend_from_slice(if window == 0 { b":g" } else { b":d" });
    k.extend_from_slice(len_ms.to_string().as_bytes());
    k.push(b':');
    k.extend_from_slice((start / len_ms.max(1)).to_string().as_bytes());
    k
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The browse cap's part of a round trip: this node's requests in flight,
/// written into one hash of the zone's nodes (`HSET`, the field the node's
/// name, the value `<in flight>:<wall clock ms>`), and the other nodes'
/// read back (`HGETALL`). A node that stopped writing (it stopped, or lost
/// the store) counts no more once its value is older than `stale_after_ms`,
/// and its field is deleted in the next round trip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowseReport {
    pub node: u64,
    pub in_flight: u32,
    pub wall_ms: u64,
    pub stale_after_ms: u64,
    /// Fields of nodes found stale in the previous round trip.
    pub stale: Vec<Vec<u8>>,
}

/// Stale fields deleted in one round trip, at most.
const MAX_STALE: usize = 64;

/// The browse cap's hash in the store.
pub fn browse_key(zone: &str) -> Vec<u8> {
    format!("crawlward:{zone}:browse").into_bytes()
}

/// What a reply is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `SELECT`, `PEXPIREAT`, `PING`: anything but an error.
    Ack,
    /// `INCRBY` of change i: the cluster's count.
    Count(usize),
    /// `GET` of the window before change i's.
    Prev(usize),
    /// `HGETALL` of the browse cap's hash.
    Browse,
}

/// One round trip: the commands, and what their replies are for.
#[derive(Debug, Default)]
pub struct Batch {
    pub out: Vec<u8>,
    changes: Vec<Change>,
    expect: Vec<Expect>,
    /// Replies absorbed so far.
    got: usize,
    counts: Vec<(Option<i64>, Option<i64>)>,
    browse: Option<BrowseReport>,
    /// The other nodes' requests in flight, and the stale fields, from `HGETALL`.
    browse_others: Option<u32>,
    stale: Vec<Vec<u8>>,
}

/// The store did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl Batch {
    /// The commands for `changes` of zone `zone` (with `SELECT db` first on a
    /// new connection to a database other than 0; the browse cap's, with a
    /// `browse` report; a `PING` when there is nothing else, so that an idle
    /// node still learns whether the store answers).
    pub fn new(zone: &str, changes: Vec<Change>, select: Option<u32>, browse: Option<BrowseReport>) -> Batch {
        let mut b = Batch { counts: vec![(None, None); changes.len()], ..Batch::default() };
        if let Some(db) = select {
            encode(&mut b.out, &[b"SELECT", db.to_string().as_bytes()]);
            b.expect.push(Expect::Ack);
        }
        for (i, c) in changes.iter().enumerate() {
            let key = store_key(zone, c.key_bytes(), c.window, c.len_ms, c.start);
            encode(&mut b.out, &[b"INCRBY", &key, c.delta.to_string().as_bytes()]);
            b.expect.push(Expect::Count(i));
            // the key serves as the previous window until the end of the next one; set
            // with every INCRBY, not only the window's first: a store that restarted, was
            // flushed or evicted the key makes it again, and it must never stay forever
            let expire = c.start + 2 * c.len_ms + 1000;
            encode(&mut b.out, &[b"PEXPIREAT", &key, expire.to_string().as_bytes()]);
            b.expect.push(Expect::Ack);
            if c.first && c.start >= c.len_ms {
                let prev = store_key(zone, c.key_bytes(), c.window, c.len_ms, c.start - c.len_ms);
                encode(&mut b.out, &[b"GET", &prev]);
                b.expect.push(Expect::Prev(i));
            }
        }
        if let Some(r) = &browse {
            let key = browse_key(zone);
            if !r.stale.is_empty() {
                let mut args: Vec<&[u8]> = vec![b"HDEL", &key];
                args.extend(r.stale.iter().take(MAX_STALE).map(|f| f.as_slice()));
                encode(&mut b.out, &args);
                b.expect.push(Expect::Ack);
            }
            let node = r.node.to_string();
            let value = format!("{}:{}", r.in_flight, r.wall_ms);
            encode(&mut b.out, &[b"HSET", &key, node.as_bytes(), value.as_bytes()]);
            encode(&mut b.out, &[b"PEXPIRE", &key, r.stale_after_ms.to_string().as_bytes()]);
            encode(&mut b.out, &[b"HGETALL", &key]);
            b.expect.extend([Expect::Ack, Expect::Ack, Expect::Browse]);
        }
        if b.expect.is_empty() {
            encode(&mut b.out, &[b"PING"]);
            b.expect.push(Expect::Ack);
        }
        b.changes = changes;
        b.browse = browse;
        b
    }

    /// The stale fields the browse cap's `HGETALL` found, for the next round trip.
    pub fn stale(&self) -> &[Vec<u8>] {
        &self.stale
    }

    /// The other nodes' requests in flight from a `HGETALL` reply.
    fn others(&mut self, reply: &Reply) -> Result<u32, StoreError> {
        let Some(r) = &self.browse else { return Ok(0) };
        let Reply::Array(Some(items)) = reply else { return Err(StoreError("HGETALL answered no array".into())) };
        let me = r.node.to_string();
        let mut others = 0u32;
        for pair in items.chunks(2) {
            let [Reply::Bulk(Some(field)), Reply::Bulk(Some(value))] = pair else { return Err(StoreError("HGETALL answered no pairs".into())) };
            if field.as_slice() == me.as_bytes() {
                continue;
            }
            let parsed =
                std::str::from_utf8(value).ok().and_then(|v| v.split_once(':')).and_then(|(n, t)| Some((n.parse::<u32>().ok()?, t.parse::<u64>().ok()?)));
            // fresh: stamped within stale_after of this node's clock, either way. The stamp is
            // the writer's clock: one ahead of ours would otherwise keep a stopped node's
            // count fresh for as long as its lead (for ever, for a stamp far ahead)
            let fresh = |at: u64| at <= r.wall_ms.saturating_add(r.stale_after_ms) && r.wall_ms.saturating_sub(at) <= r.stale_after_ms;
            match parsed {
                Some((n, at)) if fresh(at) => others = others.saturating_add(n),
                _ if self.stale.len() < MAX_STALE => self.stale.push(field.clone()),
                _ => {}
            }
        }
        Ok(others)
    }

    /// Commands in the batch.
    pub fn commands(&self) -> usize {
        self.expect.len()
    }

    /// Changes in the batch.
    pub fn changes(&self) -> usize {
        self.changes.len()
    }

    /// Take the next reply; Ok(true) once every command has its reply.
    pub fn absorb(&mut self, reply: &Reply) -> Result<bool, StoreError> {
        let Some(what) = self.expect.get(self.got) else { return Err(StoreError("a reply to no command".into())) };
        self.got += 1;
        if let Reply::Error(e) = reply {
            return Err(StoreError(format!("the store answered \"{}\"", crate::escape::escaped(&e[..e.len().min(200)]))));
        }
        match *what {
            Expect::Ack => {}
            Expect::Count(i) => self.counts[i].0 = Some(reply.count().ok_or_else(|| StoreError("INCRBY answered no integer".into()))?),
            Expect::Prev(i) => self.counts[i].1 = Some(reply.count().ok_or_else(|| StoreError("GET answered no count".into()))?),
            Expect::Browse => self.browse_others = Some(self.others(reply)?),
        }
        Ok(self.got == self.expect.len())
    }

    /// Write what the store answered into the table (under the zone's lock).
    pub fn apply(&self, table: &mut Table<'_>) {
        for (c, (count, prev)) in self.changes.iter().zip(&self.counts) {
            if let Some(n) = count {
                table.learn(c, *n, *prev);
            }
        }
        if let Some(o) = self.browse_others {
            table.header.browse.others = o;
        }
    }
}

/// When to try the store again after `failures` failures in a row: one
/// interval, doubling, at most 5 seconds (a store that restarts is found
/// again within 5 s, and a dead one costs a connection attempt per 5 s).
pub fn backoff_ms(interval_ms: u64, failures: u32) -> u64 {
    interval_ms.saturating_mul(1u64 << failures.min(16)).min(5000).max(interval_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{BudgetLimits, Limits};
    use crate::budget_table::{AgentRef, Counted, Entry, Header, Pinned, Scope, SyncState};
    use crate::resp::Parser;
    use std::collections::HashMap;

    #[test]
    fn store_urls() {
        assert_eq!(StoreUrl::parse("valkey://127.0.0.1:6379").unwrap(), StoreUrl { host: "127.0.0.1".into(), port: 6379, db: 0 });
        assert_eq!(StoreUrl::parse("redis://cache.internal:6380/2").unwrap().db, 2);
        assert_eq!(StoreUrl::parse("valkey://[::1]:6379/1").unwrap().host, "::1");
        assert_eq!(StoreUrl::parse("valkey://[::1]:6379/1").unwrap().to_string(), "valkey://[::1]:6379/1");
        for bad in ["127.0.0.1:6379", "valkey://host", "valkey://:6379", "valkey://h:0", "valkey://h:6379/x", "valkey://user:pw@h:1", "http://h:1"] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_are_bounded_and_name_no_raw_bytes() {
        let k = store_key("crawlward_budget", &[2, 3, b'a', b' ', 0xff], 1, 60_000, 120_000);
        assert_eq!(k, b"crawlward:crawlward_budget:02036120ff:d60000:2");
        let long = [b'x'; 48];
        assert!(store_key("z", &long, 0, 86_400_000, u64::MAX).len() < 160);
    }

    #[test]
    fn backoff_doubles_to_five_seconds() {
        assert_eq!([0, 1, 2, 3, 10].map(|f| backoff_ms(100, f)), [100, 200, 400, 800, 5000]);
    }

    /// A store in a HashMap that answers a batch's commands as Redis would.
    #[derive(Default)]
    struct FakeStore {
        keys: HashMap<Vec<u8>, i64>,
        hashes: HashMap<Vec<u8>, std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
        commands: usize,
    }

    impl FakeStore {
        fn answer(&mut self, out: &[u8]) -> Vec<u8> {
            // the requests are our own encoding: arrays of bulk strings
            let mut p = Parser::default();
            p.feed(out);
            let mut replies = Vec::new();
            while let Some(Reply::Array(Some(args))) = p.next_reply().unwrap() {
                self.commands += 1;
                let a: Vec<Vec<u8>> = args.into_iter().map(|r| if let Reply::Bulk(Some(b)) = r { b } else { panic!() }).collect();
                match a[0].as_slice() {
                    b"INCRBY" => {
                        let n: i64 = std::str::from_utf8(&a[2]).unwrap().parse().unwrap();
                        let v = self.keys.entry(a[1].clone()).or_default();
                        *v += n;
                        replies.extend_from_slice(format!(":{v}\r\n").as_bytes());
                    }
                    b"GET" => match self.keys.get(&a[1]) {
                        Some(v) => {
                            let s = v.to_string();
                            replies.extend_from_slice(format!("${}\r\n{s}\r\n", s.len()).as_bytes());
                        }
                        None => replies.extend_from_slice(b"$-1\r\n"),
                    },
                    b"PEXPIREAT" | b"PEXPIRE" => replies.extend_from_slice(b":1\r\n"),
                    b"HSET" => {
                        self.hashes.entry(a[1].clone()).or_default().insert(a[2].clone(), a[3].clone());
                        replies.extend_from_slice(b":1\r\n");
                    }
                    b"HDEL" => {
                        let h = self.hashes.entry(a[1].clone()).or_default();
                        let n = a[2..].iter().filter(|f| h.remove(*f).is_some()).count();
                        replies.extend_from_slice(format!(":{n}\r\n").as_bytes());
                    }
                    b"HGETALL" => {
                        let h = self.hashes.get(&a[1]).cloned().unwrap_or_default();
                        replies.extend_from_slice(format!("*{}\r\n", 2 * h.len()).as_bytes());
                        for (f, v) in h {
                            for x in [f, v] {
                                replies.extend_from_slice(format!("${}\r\n", x.len()).as_bytes());
                                replies.extend_from_slice(&x);
                                replies.extend_from_slice(b"\r\n");
                            }
                        }
                    }
                    b"PING" => replies.extend_from_slice(b"+PONG\r\n"),
                    b"SELECT" => replies.extend_from_slice(b"+OK\r\n"),
                    _ => replies.extend_from_slice(b"-ERR unknown command\r\n"),
                }
            }
            replies
        }
    }

    struct Node {
        header: Header,
        buckets: Vec<u32>,
        entries: Vec<Entry>,
    }

    impl Node {
        fn new() -> Node {
            let mut n = Node { header: Header::empty(16), buckets: vec![0; 64], entries: vec![Entry::EMPTY; 64] };
            let mut t = Table::init(&mut n.header, &mut n.buckets, &mut n.entries, 16, Pinned::new([("Googlebot", true, true)]).keys(), 7);
            t.start_sync(2, 0);
            n
        }
        fn table(&mut self) -> Table<'_> {
            Table::attach(&mut self.header, &mut self.buckets, &mut self.entries)
        }
        /// One round trip with the store; false if the store is down.
        fn sync(&mut self, store: Option<&mut FakeStore>) -> bool {
            // (the module takes changes only when it has a connection to send them on)
            let Some(store) = store else {
                self.table().set_sync(false, 0);
                return false;
            };
            let mut changes = Vec::new();
            self.table().take_changes(MAX_CHANGES, &mut changes);
            let mut b = Batch::new("z", changes, None, None);
            let mut p = Parser::default();
            p.feed(&store.answer(&b.out));
            let mut done = false;
            while let Some(r) = p.next_reply().unwrap() {
                done = b.absorb(&r).unwrap();
            }
            assert!(done);
            let mut t = self.table();
            b.apply(&mut t);
            t.set_sync(true, 0);
            true
        }
    }

    /// One round trip of the browse cap's part alone, for node `node` at `wall_ms`; the stale
    /// fields it found.
    fn browse_trip(n: &mut Node, node: u64, wall_ms: u64, stale: Vec<Vec<u8>>, store: &mut FakeStore) -> Vec<Vec<u8>> {
        let in_flight = n.header.browse.in_flight;
        let mut b = Batch::new("z", Vec::new(), None, Some(BrowseReport { node, in_flight, wall_ms, stale_after_ms: 450, stale }));
        let mut p = Parser::default();
        p.feed(&store.answer(&b.out));
        while let Some(r) = p.next_reply().unwrap() {
            b.absorb(&r).unwrap();
        }
        let mut t = n.table();
        b.apply(&mut t);
        t.set_sync(true, 0);
        b.stale().to_vec()
    }

    #[test]
    fn the_browse_cap_counts_every_nodes_requests_in_flight() {
        let (mut a, mut b, mut store) = (Node::new(), Node::new(), FakeStore::default());
        browse_trip(&mut a, 1, 900, vec![], &mut store);
        browse_trip(&mut b, 2, 900, vec![], &mut store);
        // a cap of 4 in flight across two nodes: 3 on node a
        for _ in 0..3 {
            assert!(a.table().take_browse(4, 0));
        }
        browse_trip(&mut a, 1, 1000, vec![], &mut store);
        browse_trip(&mut b, 2, 1010, vec![], &mut store);
        assert_eq!(b.header.browse.others, 3);
        assert!(b.table().take_browse(4, 0), "3 + 1");
        assert!(!b.table().take_browse(4, 0), "the cluster's 4 are taken");
        assert_eq!((b.header.browse.passed, b.header.browse.refused), (1, 1));
        // node a's requests end: node b learns it at its next round trip
        for _ in 0..3 {
            a.table().release_browse(0);
        }
        browse_trip(&mut a, 1, 1100, vec![], &mut store);
        browse_trip(&mut b, 2, 1110, vec![], &mut store);
        assert!(b.table().take_browse(4, 0));
        // node a stops writing (it stopped, or lost the store): its count goes stale and
        // its field is deleted
        for _ in 0..2 {
            assert!(a.table().take_browse(4, 0));
        }
        browse_trip(&mut a, 1, 1200, vec![], &mut store);
        let stale = browse_trip(&mut b, 2, 1210, vec![], &mut store);
        assert_eq!((b.header.browse.others, stale.len()), (2, 0));
        let stale = browse_trip(&mut b, 2, 1700, vec![], &mut store);
        assert_eq!((b.header.browse.others, stale.clone()), (0, vec![b"1".to_vec()]));
        browse_trip(&mut b, 2, 1800, stale, &mut store);
        assert_eq!(store.hashes[&browse_key("z")].len(), 1, "only node b's field is left");
        // a node whose clock is far ahead (or a field a client of the store wrote with a
        // stamp in the future) counts nothing and is deleted: it cannot hold places for ever
        store.hashes.get_mut(&browse_key("z")).unwrap().insert(b"9".to_vec(), b"4:999999999999".to_vec());
        let stale = browse_trip(&mut b, 2, 1900, vec![], &mut store);
        assert_eq!((b.header.browse.others, stale), (0, vec![b"9".to_vec()]));
        // in fallback, each node its share: 4 / 2
        let mut c = Node::new();
        // a worker (process slot 3) dies holding 2 places; the worker nginx starts in its
        // slot gives them back, and another slot's place stays taken
        let mut d = Node::new();
        assert!(d.table().take_browse(8, 3) && d.table().take_browse(8, 3) && d.table().take_browse(8, 5));
        assert_eq!(d.header.browse.in_flight, 3);
        assert_eq!(d.table().forget_browse_slot(3), 2);
        assert_eq!(d.header.browse.in_flight, 1, "slot 5's place stays taken");
        d.table().release_browse(3);
        assert_eq!(d.header.browse.in_flight, 1, "a release in a slot that holds nothing gives back nothing");
        // every slot nginx has counts apart: a new process in slot 133 (128 past slot 5, which
        // shared its count before) leaves the live worker of slot 5 its place
        assert_eq!(d.table().forget_browse_slot(133), 0);
        assert_eq!(d.header.browse.in_flight, 1, "slot 5's place is still taken");
        assert!(d.table().take_browse(8, 1023));
        d.table().release_browse(5);
        assert_eq!((d.header.browse.in_flight, d.header.browse.by_slot[1023]), (1, 1), "the last slot nginx has, its own");
        assert!(c.table().take_browse(4, 0) && c.table().take_browse(4, 0));
        assert!(!c.table().take_browse(4, 0), "fallback: 2 of 4 on each of 2 nodes");
    }

    fn limits() -> BudgetLimits {
        BudgetLimits { address: Limits::parse("60r/m,6r/m").unwrap(), ..BudgetLimits::SEED_003 }
    }

    fn crawler(deep: bool) -> Counted<'static> {
        Counted { address: [7; 16], agent: AgentRef::Name(b"Rotbot"), deep, scope: Scope::Crawler }
    }

    #[test]
    fn a_crawler_alternating_between_two_nodes_gets_one_budget() {
        let (mut a, mut b, mut store) = (Node::new(), Node::new(), FakeStore::default());
        assert_eq!(a.table().sync_state(), SyncState::Fallback, "until the store first answers");
        a.sync(Some(&mut store));
        b.sync(Some(&mut store));
        assert_eq!(a.table().sync_state(), SyncState::Synced);
        // 2 requests a sync interval (100 ms) on each node, alternating, for a minute
        let mut passed = 0;
        for tick in 0..600u64 {
            for (i, n) in [&mut a, &mut b].into_iter().enumerate() {
                let now = 60_000 + tick * 100 + i as u64;
                passed += n.table().take(&crawler(true), now, &limits(), 1, false).is_ok() as u32;
            }
            a.sync(Some(&mut store));
            b.sync(Some(&mut store));
        }
        // the deep limit is 6 a minute: each node may go over by what it let through in one
        // interval before it learnt the other's counts (at most one request here)
        assert!((6..=8).contains(&passed), "{passed} deep requests passed across two nodes");
        assert!(store.keys.len() <= 16, "keys per window, not per request: {}", store.keys.len());
    }

    #[test]
    fn without_the_store_each_node_has_its_share_and_gets_the_cluster_back() {
        let (mut a, mut store) = (Node::new(), FakeStore::default());
        a.sync(Some(&mut store));
        // the other node spent 4 of the 6 deep requests this minute
        let k = store_key("z", &crate::budget_table::address_key([7; 16])[..18], 1, 60_000, 60_000);
        store.keys.insert(k, 4);
        assert!(a.table().take(&crawler(true), 60_000, &limits(), 1, false).is_ok());
        a.sync(Some(&mut store));
        let got: Vec<bool> = (1..5).map(|i| a.table().take(&crawler(true), 60_000 + i, &limits(), 1, false).is_ok()).collect();
        assert_eq!(got, [true, false, false, false], "5 in the cluster, then the sixth: 4 + 2");
        // the store goes away: this node alone, its half of the budget (3 deep a minute)
        assert!(!a.sync(None));
        assert_eq!(a.table().sync_state(), SyncState::Fallback);
        assert!(a.table().take(&crawler(true), 60_010, &limits(), 1, false).is_ok(), "its own 2, under its share of 3");
        assert!(a.table().take(&crawler(true), 60_011, &limits(), 1, false).is_err());
        assert_eq!((a.header.sync.failures, a.header.sync.fallbacks), (1, 1));
        // it comes back: the cluster's counts again
        a.sync(Some(&mut store));
        assert_eq!(a.table().sync_state(), SyncState::Synced);
        assert!(a.table().take(&crawler(true), 60_012, &limits(), 1, false).is_err(), "4 + 3: over the 6 of the cluster");
    }

    #[test]
    fn commands_follow_what_changed_not_the_table() {
        let (mut a, mut store) = (Node::new(), FakeStore::default());
        for i in 0..40u8 {
            let c = Counted { address: [i; 16], agent: AgentRef::Name(b"Rotbot"), deep: false, scope: Scope::Crawler };
            assert!(a.table().take(&c, 1000, &limits(), 1, false).is_ok());
        }
        a.sync(Some(&mut store));
        let first = store.commands;
        // 40 addresses, one agent name and the shared budget: INCRBY and PEXPIREAT each
        // (and no previous window to read at the epoch's first minute)
        assert_eq!(first, 42 * 2);
        a.sync(Some(&mut store));
        assert_eq!(store.commands - first, 1, "nothing changed: one PING");
        let new = Counted { address: [200; 16], ..crawler(false) };
        assert!(a.table().take(&new, 1001, &limits(), 1, false).is_ok());
        a.sync(Some(&mut store));
        assert_eq!(store.commands - first - 1, 3 * 2, "one request: its address, its name and the shared budget");
    }

    #[test]
    fn a_store_that_answers_nonsense_is_a_failure() {
        let mut b = Batch::new("z", Vec::new(), Some(3), None);
        assert_eq!(b.commands(), 1, "SELECT alone says whether the store answers");
        assert!(b.absorb(&Reply::Status(b"OK".to_vec())).unwrap());
        assert!(b.absorb(&Reply::Integer(1)).is_err(), "a reply to no command");
        let mut n = Node::new();
        assert!(n.table().take(&crawler(false), 5, &limits(), 1, false).is_ok());
        let mut changes = Vec::new();
        n.table().take_changes(10, &mut changes);
        let mut b = Batch::new("z", changes, None, None);
        let e = b.absorb(&Reply::Error(b"READONLY You can't write against a read only replica.".to_vec())).unwrap_err();
        assert!(e.0.contains("READONLY"), "{e:?}");
        let mut b2 = Batch::new("z", vec![], None, None);
        b2.expect = vec![Expect::Count(0)];
        b2.counts = vec![(None, None)];
        assert!(b2.absorb(&Reply::Status(b"QUEUED".to_vec())).is_err());
    }
}
