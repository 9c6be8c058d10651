//! Budget sync's connection to the store (Valkey or Redis), on nginx's event
//! loop: one per node and zone, owned by whichever worker holds the zone's
//! claim (`budget_table::Table::claim_sync`). Every sync interval the owner
//! takes what changed from the zone (under its lock), sends it as one
//! pipelined batch, and writes the cluster's counts back when the replies are
//! in. Requests never wait for any of it: they decide from the zone as it
//! stands. What to send and what the replies mean is `crawlward_policy::sync`;
//! this file only moves bytes, with nginx's non-blocking connect, read and
//! write events and a timer.
//!
//! A store that does not connect, answer within `sync_timeout`, or answers
//! an error puts the zone into fallback (each node its own budgets divided by
//! `nodes=`), logged once; the owner tries again with backoff, and the first
//! whole round trip puts the zone back.

use crate::conf::budget::{BudgetZone, SyncConf};
use crawlward_policy::budget_table::Table;
use crawlward_policy::resp::Parser;
use crawlward_policy::sync::{backoff_ms, Batch, BrowseReport, MAX_CHANGES};
use ngx::ffi::{
    ngx_close_connection, ngx_connection_t, ngx_event_connect_peer, ngx_event_get_peer, ngx_event_t, ngx_handle_read_event, ngx_handle_write_event, ngx_log_t,
    ngx_msec_t, ngx_peer_connection_t, ngx_str_t, sockaddr, NGX_AGAIN, NGX_LOG_CRIT, NGX_LOG_NOTICE, NGX_LOG_WARN, NGX_OK,
};
use ngx::ngx_log_error;
use std::ffi::c_void;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No connection (this worker does not own the sync, or waits to try again).
    Idle,
    /// Connecting: the write event says when it is done.
    Connecting,
    /// Connected, no batch in flight.
    Ready,
    /// A batch sent (or being sent), its replies awaited.
    InFlight,
}

/// One zone's sync in this worker.
struct Link {
    zone: *const BudgetZone,
    conf: *const SyncConf,
    timer: ngx_event_t,
    /// The connection's log: the cycle's, at `crit`, so that nginx's own
    /// `connect() failed` lines do not repeat every retry (ours say it once).
    quiet_log: ngx_log_t,
    name: ngx_str_t,
    conn: *mut ngx_connection_t,
    state: State,
    /// When the state began (nginx's clock, ms).
    since: u64,
    retry_at: u64,
    /// Failures in a row.
    failures: u32,
    /// A new connection: select the database first.
    fresh: bool,
    batch: Option<Batch>,
    written: usize,
    parser: Parser,
    /// What a read takes from the connection at a time: made once (a buffer on the
    /// stack would be zeroed on every read).
    read_buf: Box<[u8]>,
    /// Browse cap fields of nodes found stale, deleted in the next round trip.
    stale: Vec<Vec<u8>>,
}

/// The most a read takes from the store's connection at a time.
const READ_AT_ONCE: usize = 16 * 1024;

/// The worker's pid, which names its claim on a zone's sync.
fn me() -> u64 {
    // SAFETY: a plain read of a global nginx sets before the worker's init_process.
    unsafe { ngx::ffi::ngx_pid as u64 }
}

fn cycle_log() -> *mut ngx_log_t {
    // SAFETY: ngx_cycle is the running cycle in a worker.
    let cycle = unsafe { ngx::ffi::ngx_cycle };
    // SAFETY: as above.
    unsafe { (*cycle).log }
}

/// In each worker (init_process): a link and its timer for every synced zone.
/// The links live as long as the worker.
pub fn start(zones: &[Box<BudgetZone>]) {
    for z in zones {
        let Some(conf) = z.sync.as_ref() else { continue };
        let link = Box::into_raw(Box::new(Link {
            zone: &**z,
            conf,
            // SAFETY: all-zero is nginx's own initial state for an event and a log.
            timer: unsafe { std::mem::zeroed() },
            // SAFETY: as above; filled in below.
            quiet_log: unsafe { std::mem::zeroed() },
            name: ngx_str_t { len: conf.name.len(), data: conf.name.as_ptr() as *mut u8 },
            conn: std::ptr::null_mut(),
            state: State::Idle,
            since: 0,
            retry_at: 0,
            failures: 0,
            fresh: false,
            batch: None,
            written: 0,
            parser: Parser::default(),
            read_buf: vec![0; READ_AT_ONCE].into_boxed_slice(),
            stale: Vec::new(),
        }));
        // SAFETY: link was just made and is never freed; the timer is cancelable, so a
        // worker shutting down does not wait for it.
        let made = unsafe { &mut *link };
        // SAFETY: the cycle's log, live for the worker's life.
        made.quiet_log = unsafe { *cycle_log() };
        made.quiet_log.log_level = NGX_LOG_CRIT as usize;
        let ev = &mut made.timer;
        ev.handler = Some(on_tick);
        ev.data = link as *mut c_void;
        ev.log = cycle_log();
        ev.set_cancelable(1);
        // SAFETY: as above.
        unsafe { ngx::ffi::ngx_add_timer(ev, conf.interval_ms as ngx_msec_t) };
    }
}

unsafe extern "C" fn on_tick(ev: *mut ngx_event_t) {
    crate::base::guard((), || {
        // SAFETY: the timer's data is its link, alive for the worker's life; the event loop
        // runs one handler at a time, so this is the only reference to it.
        let data = unsafe { (*ev).data } as *mut Link;
        // SAFETY: as above.
        let link = unsafe { &mut *data };
        if link.tick() {
            // SAFETY: ev is the link's timer.
            unsafe { ngx::ffi::ngx_add_timer(ev, link.conf().interval_ms as ngx_msec_t) };
        }
    })
}

unsafe extern "C" fn on_write(ev: *mut ngx_event_t) {
    crate::base::guard((), || {
        // SAFETY: a connection event of a link's connection: its data is the link (as in on_tick).
        let link = unsafe { link_of(ev) };
        match link.state {
            State::Connecting => link.connected(),
            State::InFlight => link.flush(),
            _ => {}
        }
    })
}

unsafe extern "C" fn on_read(ev: *mut ngx_event_t) {
    crate::base::guard((), || {
        // SAFETY: as in on_write.
        let link = unsafe { link_of(ev) };
        link.read();
    })
}

/// The link of a connection event.
///
/// # Safety
/// `ev` must be an event of a link's live connection, whose data is the link;
/// the event loop runs one handler at a time, so this is the only reference to it.
unsafe fn link_of<'a>(ev: *mut ngx_event_t) -> &'a mut Link {
    // SAFETY: per the contract, the event's data is its connection ...
    let c = unsafe { (*ev).data } as *mut ngx_connection_t;
    // SAFETY: ... whose data is the link ...
    let link = unsafe { (*c).data } as *mut Link;
    // SAFETY: ... alive for the worker's life.
    unsafe { &mut *link }
}

impl Link {
    fn conf(&self) -> &SyncConf {
        // SAFETY: the conf is the zone's, in the cycle's configuration, which outlives the worker's links.
        unsafe { &*self.conf }
    }

    fn zone(&self) -> &BudgetZone {
        // SAFETY: as in conf.
        unsafe { &*self.zone }
    }

    fn with_table<T>(&self, f: impl FnOnce(&mut Table<'_>) -> T) -> Option<T> {
        self.zone().table.as_ref().and_then(|t| t.with(f))
    }

    /// The timer: claim the sync, connect, send what changed, or give up on a
    /// store that takes too long. False when the worker is exiting.
    fn tick(&mut self) -> bool {
        let now = crate::base::now_ms() as u64;
        // SAFETY: a plain read of a global the worker's own signal handling sets.
        if unsafe { ngx::ffi::ngx_exiting } != 0 {
            self.close();
            self.with_table(|t| t.release_sync(me()));
            return false;
        }
        let (interval, timeout, generation) = (self.conf().interval_ms, self.conf().timeout_ms, self.zone().generation);
        let owner = self.with_table(|t| t.claim_sync(me(), generation, now, 3 * interval + timeout)).unwrap_or(false);
        if !owner {
            self.close();
            return true;
        }
        match self.state {
            State::Idle if now >= self.retry_at => self.connect(now),
            State::Idle => {}
            State::Connecting | State::InFlight if now.saturating_sub(self.since) >= timeout => {
                self.fail(if self.state == State::Connecting { "no connection within sync_timeout" } else { "no reply within sync_timeout" })
            }
            State::Connecting | State::InFlight => {}
            State::Ready => self.send(now),
        }
        true
    }

    fn connect(&mut self, now: u64) {
        let conf = self.conf();
        // SAFETY: all-zero is a peer connection with nothing set; the fields nginx reads are
        // set below. The sockaddr and name live in the configuration, as long as the link.
        let mut pc: ngx_peer_connection_t = unsafe { std::mem::zeroed() };
        pc.sockaddr = conf.addr.as_ptr() as *mut sockaddr;
        pc.socklen = conf.addr.len();
        pc.name = &mut self.name;
        pc.get = Some(ngx_event_get_peer);
        pc.log = &mut self.quiet_log;
        pc.set_log_error(ngx::ffi::ngx_connection_log_error_e_NGX_ERROR_INFO);
        // SAFETY: pc is complete for a connection to one address.
        let rc = unsafe { ngx_event_connect_peer(&mut pc) };
        if pc.connection.is_null() {
            return self.fail("cannot connect");
        }
        self.conn = pc.connection;
        // SAFETY: the connection nginx just made for us: its events are ours to set. Idle:
        // a worker shutting down gracefully closes it through its read handler (with
        // c->close set) like a keep-alive connection, rather than exit with it open.
        let c = unsafe { &mut *self.conn };
        c.data = self as *mut Link as *mut c_void;
        c.set_idle(1);
        // SAFETY: as above, the connection's read event ...
        unsafe { (*c.read).handler = Some(on_read) };
        // SAFETY: ... and its write event.
        unsafe { (*c.write).handler = Some(on_write) };
        self.since = now;
        if rc == NGX_AGAIN as isize {
            self.state = State::Connecting;
        } else if rc == NGX_OK as isize {
            self.connected();
        } else {
            self.fail("cannot connect");
        }
    }

    fn connected(&mut self) {
        self.state = State::Ready;
        self.fresh = true;
        self.send(crate::base::now_ms() as u64);
    }

    /// Take what changed and send it, with the browse cap's requests in flight
    /// when the zone has a cap (a PING when there is nothing to send).
    fn send(&mut self, now: u64) {
        let mut changes = Vec::new();
        let (interval, timeout) = (self.conf().interval_ms, self.conf().timeout_ms);
        let browse = self.zone().browse_cap;
        let stale = std::mem::take(&mut self.stale);
        let report = self
            .with_table(|t| {
                t.take_changes(MAX_CHANGES, &mut changes);
                let b = &t.header.browse;
                browse.then(|| BrowseReport {
                    node: b.node,
                    in_flight: b.in_flight,
                    wall_ms: crate::base::wall_ms(),
                    stale_after_ms: 3 * interval + timeout,
                    stale,
                })
            })
            .flatten();
        let db = self.conf().url.db;
        let select = (self.fresh && db != 0).then_some(db);
        self.fresh = false;
        self.batch = Some(Batch::new(&self.zone().name, changes, select, report));
        self.written = 0;
        self.state = State::InFlight;
        self.since = now;
        self.flush();
    }

    /// Write what is left of the batch.
    fn flush(&mut self) {
        let Some(batch) = self.batch.as_ref() else { return };
        let c = self.conn;
        while self.written < batch.out.len() {
            let rest = &batch.out[self.written..];
            // SAFETY: c is our live connection; send reads at most rest.len() bytes of rest.
            let send = unsafe { (*c).send }.expect("connections have send");
            // SAFETY: as above.
            let n = unsafe { send(c, rest.as_ptr() as *mut u8, rest.len()) };
            if n > 0 {
                self.written += n as usize;
            } else if n == NGX_AGAIN as isize {
                // SAFETY: the connection's write event, to be told when there is room.
                let write = unsafe { (*c).write };
                // SAFETY: as above.
                if unsafe { ngx_handle_write_event(write, 0) } != NGX_OK as isize {
                    self.fail("cannot wait to write");
                }
                return;
            } else {
                return self.fail("cannot send");
            }
        }
        // SAFETY: the connection's read event, for the replies.
        let read = unsafe { (*c).read };
        // SAFETY: as above.
        if unsafe { ngx_handle_read_event(read, 0) } != NGX_OK as isize {
            self.fail("cannot wait for replies");
        }
    }

    fn read(&mut self) {
        // SAFETY: a read event comes only for our live connection.
        if !self.conn.is_null() && unsafe { (*self.conn).close() } != 0 {
            // the worker is shutting down: another worker or node carries on
            self.close();
            self.with_table(|t| t.release_sync(me()));
            return;
        }
        loop {
            if self.conn.is_null() {
                return;
            }
            let c = self.conn;
            let buf = &mut self.read_buf;
            // SAFETY: c is our live connection; recv writes at most buf.len() bytes into buf.
            let recv = unsafe { (*c).recv }.expect("connections have recv");
            // SAFETY: as above.
            let n = unsafe { recv(c, buf.as_mut_ptr(), buf.len()) };
            if n == NGX_AGAIN as isize {
                // SAFETY: as in flush.
                let read = unsafe { (*c).read };
                // SAFETY: as above.
                if unsafe { ngx_handle_read_event(read, 0) } != NGX_OK as isize {
                    self.fail("cannot wait for replies");
                }
                return;
            }
            if n <= 0 {
                return self.fail(if n == 0 { "the store closed the connection" } else { "cannot read" });
            }
            self.parser.feed(&self.read_buf[..n as usize]);
            loop {
                let reply = match self.parser.next_reply() {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => return self.fail(&format!("the store broke the protocol ({e})")),
                };
                let Some(batch) = self.batch.as_mut() else { return self.fail("a reply to no command") };
                match batch.absorb(&reply) {
                    Ok(true) => self.done(),
                    Ok(false) => {}
                    Err(e) => return self.fail(&e.0),
                }
            }
        }
    }

    /// Every reply of the batch is in: the cluster's counts into the zone.
    fn done(&mut self) {
        let Some(batch) = self.batch.take() else { return };
        self.stale = batch.stale().to_vec();
        let wall = crate::base::wall_ms();
        let back = self
            .with_table(|t| {
                batch.apply(t);
                t.header.sync.batches += 1;
                t.header.sync.commands += batch.commands() as u64;
                t.set_sync(true, wall)
            })
            .unwrap_or(false);
        if back || self.failures > 0 {
            ngx_log_error!(
                NGX_LOG_NOTICE,
                cycle_log(),
                "crawlward_budget_zone \"{}\": the store {} answers: the budgets are the cluster's{}",
                self.zone().name,
                self.conf().url,
                if self.failures > 0 { " again" } else { "" }
            );
        }
        self.failures = 0;
        self.state = State::Ready;
    }

    /// The store failed: close, fall back (logged once), try again later.
    fn fail(&mut self, why: &str) {
        self.close();
        self.failures = self.failures.saturating_add(1);
        let now = crate::base::now_ms() as u64;
        self.retry_at = now + backoff_ms(self.conf().interval_ms, self.failures - 1);
        let wall = crate::base::wall_ms();
        let changed = self.with_table(|t| t.set_sync(false, wall)).unwrap_or(false);
        if changed || self.failures == 1 {
            ngx_log_error!(
                NGX_LOG_WARN,
                cycle_log(),
                "crawlward_budget_zone \"{}\": the store {} does not answer ({why}): each node keeps its own budgets divided by {} until it does",
                self.zone().name,
                self.conf().url,
                self.conf().nodes
            );
        }
    }

    fn close(&mut self) {
        if !self.conn.is_null() {
            // SAFETY: our live connection, closed once: the pointer is cleared with it.
            unsafe { ngx_close_connection(self.conn) };
            self.conn = std::ptr::null_mut();
        }
        self.state = State::Idle;
        self.batch = None;
        self.parser.reset();
    }
}
