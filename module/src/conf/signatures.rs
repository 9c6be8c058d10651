//! Signed agents (`crawlward_signatures keys=FILE [skew=60s]
//! [hosts=name,...] [replay=name:size] [failures=10];`): the keys of the
//! agents' directories, read when the configuration is, the clock skew a
//! signature's window allows, the hosts signatures are made for here, the
//! zone that remembers verified signatures' nonces, and the failed
//! verifications an address may cost each worker a minute. The check is
//! `crawlward_policy::signature`; the request path is `request::signature`.

use crate::conf::directive::{add_zone, args, conf_error, conf_ok, text, IS_DUPLICATE};
use crate::conf::MainConf;
use crate::state::replay::{ReplayShm, LAYOUT};
use crate::state::shm::{Opened, Table as ShmTable};
use crawlward_policy::replay_table::{layout, Entry, Header, Table, BYTES_PER_NONCE, MAX_DIRECTORIES};
use crawlward_policy::signature::{FailedVerifications, KeyRing, Settings, DEFAULT_FAILURES_PER_MINUTE, MAX_SKEW_S};
use ngx::ffi::{ngx_conf_full_name, ngx_conf_t, ngx_int_t, ngx_shm_zone_t, NGX_LOG_ALERT, NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_LOG_WARN, NGX_OK};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::cell::RefCell;
use std::ffi::{c_char, c_void};

/// What the signature check runs by.
pub struct Signatures {
    pub keys: KeyRing,
    pub settings: Settings,
    /// The replay zone, when replays are refused.
    pub replay: Option<Box<ReplayConf>>,
    /// The hosts signatures are made for here (`hosts=`); empty: any.
    pub hosts: Vec<String>,
    /// This worker's failed verifications per client address (`failures=`):
    /// each worker has its own copy, and workers are single-threaded.
    pub failures: RefCell<FailedVerifications>,
}

/// The replay zone: its name, and its table, set by the zone's init before workers start.
pub struct ReplayConf {
    pub name: String,
    pub table: Option<ReplayShm>,
    /// The key file's directories, in its order: each has the part of the
    /// table at its place.
    pub directories: Vec<String>,
    /// This configuration's generation, counted in the zone's header.
    pub generation: u64,
}

/// `crawlward_signatures keys=FILE [skew=60s];`
///
/// # Safety
/// nginx calls it as a directive handler with our main conf.
pub unsafe extern "C" fn set_signatures(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf (the directive's conf offset is the main conf).
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.signatures.is_some() {
            return IS_DUPLICATE;
        }
        let mut file = None;
        let mut replay = None;
        let mut hosts = Vec::new();
        let mut settings = Settings::default();
        let mut failures = None;
        // SAFETY: inside a directive handler; the words live in the configuration's pool.
        for word in unsafe { args(cf) }.iter().skip(1) {
            let w = text(word);
            if let Some(path) = w.strip_prefix("keys=").filter(|p| !p.is_empty()) {
                // the path's own bytes, resolved against the configuration prefix
                let mut name = ngx::ffi::ngx_str_t { len: path.len(), data: word.data.wrapping_add("keys=".len()) };
                // SAFETY: inside a directive handler, cf is the configuration being parsed.
                let cycle = unsafe { (*cf).cycle };
                // SAFETY: name points into the word (in the configuration's pool); a relative
                // name is copied into the cycle's pool.
                if unsafe { ngx_conf_full_name(cycle, &mut name, 1) } != 0 {
                    return conf_error();
                }
                file = Some(text(&name));
            } else if let Some(skew) = w.strip_prefix("skew=").and_then(seconds).filter(|s| *s <= MAX_SKEW_S) {
                settings.skew_s = skew;
            } else if let Some(n) = w.strip_prefix("failures=").and_then(|n| n.parse::<u16>().ok()).filter(|_| failures.is_none()) {
                failures = Some(n);
            } else if let Some(list) = w.strip_prefix("hosts=").filter(|l| !l.is_empty() && hosts.is_empty()) {
                hosts = list.split(',').map(str::to_ascii_lowercase).collect();
            } else if let Some(spec) = w.strip_prefix("replay=").filter(|_| replay.is_none()) {
                let mut boxed = Box::new(ReplayConf { name: String::new(), table: None, directories: Vec::new(), generation: 0 });
                // the zone's data is the ReplayConf: boxed, so its address stays put
                let data = &mut *boxed as *mut ReplayConf as *mut c_void;
                // SAFETY: inside a directive handler.
                let Some((shm, name)) = (unsafe { add_zone(cf, &LAYOUT, spec, data) }) else { return conf_error() };
                // SAFETY: shm is a valid entry of the cycle's shared memory list.
                unsafe { (*shm).init = Some(init_zone) };
                boxed.name = name;
                replay = Some(boxed);
            } else {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "invalid parameter \"{w}\" in \"crawlward_signatures\" directive, expected keys=FILE, skew=TIME (at most {MAX_SKEW_S}s), hosts=NAME,..., replay=name:size and failures=N (0 to 65535)"
                );
                return conf_error();
            }
        }
        let Some(file) = file else {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_signatures\" directive needs keys=FILE");
            return conf_error();
        };
        // the RFC's test key signs published examples anyone can copy: never trusted here
        let keys = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read \"{file}\": {e}"))
            .and_then(|json| KeyRing::from_keys_file(&json, false).map_err(|e| format!("\"{file}\": {e}")));
        match keys {
            Ok(keys) => {
                if let Some(z) = replay.as_deref_mut() {
                    if keys.origins().len() > MAX_DIRECTORIES {
                        ngx_conf_log_error!(
                            NGX_LOG_EMERG,
                            cf,
                            "\"crawlward_signatures\" directive: \"{file}\" holds {} directories: a replay zone is split between at most {MAX_DIRECTORIES}",
                            keys.origins().len()
                        );
                        return conf_error();
                    }
                    z.directories = keys.origins().to_vec();
                }
                mcf.signatures = Some(Box::new(Signatures {
                    keys,
                    settings,
                    replay,
                    hosts,
                    failures: RefCell::new(FailedVerifications::new(failures.unwrap_or(DEFAULT_FAILURES_PER_MINUTE))),
                }));
                conf_ok()
            }
            Err(e) => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_signatures\" directive: {e}");
                conf_error()
            }
        }
    })
}

/// The replay zone's init: in the master, at start and on every reload,
/// before workers fork. A zone kept over a reload (same name and size) keeps
/// its nonces, so a reload opens no window for replays. When the key file's
/// directories changed (which moves their parts), the table is left as it
/// is, for the previous workers if the reload fails, and the first new
/// worker moves its nonces ([`lay_out_again`]): the table's header lists
/// the directories it is split between.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::base::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed ReplayConf.
        let log = unsafe { (*zone).shm.log };
        // SAFETY: as above.
        let data = unsafe { (*zone).data } as *mut ReplayConf;
        // SAFETY: as above: the boxed ReplayConf, which lives as long as the configuration.
        let z = unsafe { &mut *data };
        let hash_seed = crawlward_policy::random_u64();
        // SAFETY: the zone nginx passes to its init.
        let opened = unsafe {
            ShmTable::<Header, Entry>::open(
                zone,
                &LAYOUT,
                layout,
                Header::EMPTY,
                || Entry::EMPTY,
                |h, _, e| Table::init(h, e, hash_seed, &z.directories).map(|_| ()),
            )
        };
        let t = match opened.and_then(Opened::fixed) {
            Ok((t, None)) => t,
            Ok((t, Some(entries))) => {
                ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_signatures replay zone \"{}\": room for {entries} nonces of {BYTES_PER_NONCE} bytes", z.name);
                t
            }
            Err(e) => {
                ngx_log_error!(
                    NGX_LOG_EMERG,
                    log,
                    "crawlward_signatures replay zone \"{}\" {e}: each nonce takes {BYTES_PER_NONCE} bytes, and at least 16 fit",
                    z.name
                );
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
        };
        z.generation = t.with(|h, _, _| {
            h.generations += 1;
            h.generations
        });
        z.table = Some(ReplayShm(t));
        NGX_OK as ngx_int_t
    })
}

/// In a worker of a new configuration, before its first request: when the
/// table's header lists other directories than this configuration's key
/// file, the first worker moves every live nonce to its directory's new part
/// and lists the new parts (the others find it done), where the previous
/// configuration's workers, still finishing their requests, find them too: a
/// signature seen before the reload is still a replay after it, whichever
/// worker answers. A process of a configuration a newer one already claimed
/// the table for (it started late) leaves it as it is.
pub fn lay_out_again(s: &Signatures, log: *mut ngx::ffi::ngx_log_t) {
    let Some(z) = s.replay.as_deref() else { return };
    let Some(shm) = z.table.as_ref() else { return };
    let now_s = (crate::base::wall_ms() / 1000) as i64;
    let relaid: Result<_, String> = shm.with(|t| {
        if t.header.claimed_by > z.generation {
            return Ok(None);
        }
        let relaid = if t.lists(&z.directories) { None } else { Some(t.relay(&z.directories, now_s)?) };
        t.header.claimed_by = z.generation;
        Ok(relaid)
    });
    match relaid {
        Ok(Some(r)) => {
            // a nonce dropped from a directory still listed can be sent again once
            let level = if r.lost > 0 { NGX_LOG_WARN } else { NGX_LOG_NOTICE };
            ngx_log_error!(
                level,
                log,
                "crawlward_signatures replay zone \"{}\": the key file's directories changed: {} nonces moved to their directories' new parts, {} dropped with their directory, {} lost for want of a free slot in their new part",
                z.name,
                r.moved,
                r.gone,
                r.lost
            );
            crate::release_freed_memory();
        }
        Ok(None) => {}
        Err(e) => {
            ngx_log_error!(
                NGX_LOG_ALERT,
                log,
                "crawlward_signatures replay zone \"{}\" {e}: it is left as the previous configuration laid it out, and the signatures of this one's new directories are taken as unverified",
                z.name
            );
        }
    }
}

/// `60s`, `60` or `1m` in seconds.
fn seconds(text: &str) -> Option<i64> {
    let (number, unit) = match text.strip_suffix('s') {
        Some(n) => (n, 1),
        None => text.strip_suffix('m').map_or((text, 1), |n| (n, 60)),
    };
    number.parse::<i64>().ok().filter(|n| *n >= 0).map(|n| n * unit)
}
