//! The proportional ladder (`crawlward_ladder zone=name:size;`): a shared
//! zone of clients, each its window of requests and its token bucket, and
//! the settings the catalogue file carries (the policy's `classifier`
//! section, checked again here by the code `crawlward check` runs). The
//! decisions are `crawlward_policy::{client_window, classifier, ladder}`;
//! the request path is `request::ladder`.

use crate::conf::directive::{add_zone, conf_error, conf_ok, IS_DUPLICATE};
use crate::conf::MainConf;
use crate::state::ladder::{LadderShm, LAYOUT};
use crate::state::shm::{Opened, Table as ShmTable};
use crawlward_policy::classifier::Settings;
use crawlward_policy::client_table::{layout, Entry, Header, Table, BYTES_PER_CLIENT};
use crawlward_policy::ladder::CookieKeys;
use crawlward_policy::signals::LadderSignals;
use ngx::ffi::{ngx_conf_t, ngx_int_t, ngx_shm_zone_t, NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_OK};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::ffi::{c_char, c_void};

/// The ladder: its zone, and what the catalogue file says it runs by.
pub struct LadderConf {
    pub name: String,
    /// The table in the zone, set by the zone's init before workers start.
    pub table: Option<LadderShm>,
    /// The table's hash seed (random, chosen when it was laid out), for the client keys.
    pub seed: u64,
    /// Set at the end of the http block, from the catalogue file.
    pub run: Option<Box<Ladder>>,
}

/// What the ladder runs by.
pub struct Ladder {
    pub settings: Settings,
    pub live: crawlward_policy::ladder::Live,
    pub signals: LadderSignals,
    /// The cookie's keys, when the policy issues the cookie.
    pub keys: Option<CookieKeys>,
    /// The window in ms.
    pub window_ms: i64,
    /// The request header that carries the rung to the application.
    pub rung_header: Option<crate::base::HeaderName>,
}

/// `crawlward_ladder zone=name:size;`
///
/// # Safety
/// nginx calls it as a directive handler with our main conf.
pub unsafe extern "C" fn set_ladder(cf: *mut ngx_conf_t, _cmd: *mut ngx::ffi::ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our MainConf (the directive's conf offset is the main conf).
        let mcf = unsafe { &mut *(conf as *mut MainConf) };
        if mcf.ladder.is_some() {
            return IS_DUPLICATE;
        }
        // SAFETY: inside a directive handler.
        let words = unsafe { crate::conf::words(cf) };
        let spec = match words.as_slice() {
            [w] if w.starts_with("zone=") => w["zone=".len()..].to_string(),
            _ => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_ladder\" directive takes zone=name:size");
                return conf_error();
            }
        };
        let mut boxed = Box::new(LadderConf { name: String::new(), table: None, seed: 0, run: None });
        // the zone's data is the LadderConf: boxed, so its address stays put
        let data = &mut *boxed as *mut LadderConf as *mut c_void;
        // SAFETY: inside a directive handler.
        let Some((shm, name)) = (unsafe { add_zone(cf, &LAYOUT, &spec, data) }) else { return conf_error() };
        // SAFETY: shm is a valid entry of the cycle's shared memory list.
        unsafe { (*shm).init = Some(init_zone) };
        boxed.name = name;
        mcf.ladder = Some(boxed);
        conf_ok()
    })
}

/// At the end of the http block: the ladder's settings from the catalogue
/// file, and the cookie's keys from their file. Err says why nginx must not start.
pub fn finish(mcf: &mut MainConf) -> Result<(), String> {
    let Some(ladder) = mcf.ladder.as_mut() else { return Ok(()) };
    let Some(spec) = mcf.identity.as_ref().and_then(|i| i.ladder.as_ref()) else {
        return Err("\"crawlward_ladder\" needs a \"crawlward_catalogue\" rendered from a policy whose classifier sets a mode (observe or enforce)".into());
    };
    let (settings, live) = crawlward_policy::ladder_settings(&spec.classifier, spec.https).map_err(|e| format!("the catalogue file's classifier: {e}"))?;
    let keys = match &live.cookie {
        None => None,
        Some(c) => {
            let text = std::fs::read_to_string(&c.key_file).map_err(|e| {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    // it is there: a new key would sign every client out
                    return format!("\"crawlward_ladder\" cannot read the cookie's key file \"{}\": {e} (run nginx as root, as its master reads the file at start)", c.key_file);
                }
                format!(
                    "\"crawlward_ladder\" cannot read the cookie's key file \"{f}\": {e} (make one, readable by root only: (umask 077; head -c 32 /dev/urandom | base64 > {f}); or set classifier.cookie.enabled: false)",
                    f = c.key_file
                )
            })?;
            Some(CookieKeys::parse(&text).map_err(|e| format!("\"crawlward_ladder\": the cookie's key file \"{}\": {e}", c.key_file))?)
        }
    };
    let window_ms = (settings.window_minutes * 60_000.0) as i64;
    let rung_header = live.rung_header.as_deref().map(crate::base::HeaderName::new);
    ladder.run = Some(Box::new(Ladder { signals: LadderSignals::new(spec), live, keys, window_ms, settings, rung_header }));
    Ok(())
}

/// The zone's init: in the master, at start and on every reload, before workers fork.
/// A zone kept over a reload (same name and size) keeps its clients.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::base::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed LadderConf.
        let log = unsafe { (*zone).shm.log };
        // SAFETY: as above.
        let data = unsafe { (*zone).data } as *mut LadderConf;
        // SAFETY: as above.
        let z = unsafe { &mut *data };
        // the keys' hash seed: random, for a zone laid out now (a kept zone keeps its own)
        let hash_seed = crawlward_policy::random_u64();
        // SAFETY: the zone nginx passes to its init.
        let opened = unsafe {
            ShmTable::<Header, Entry>::open(
                zone,
                &LAYOUT,
                layout,
                Header::EMPTY,
                || Entry::EMPTY,
                |h, b, e| {
                    Table::init(h, b, e, hash_seed);
                    Ok(())
                },
            )
        };
        match opened.and_then(Opened::fixed) {
            Ok((t, None)) => {
                z.seed = t.with(|h, _, _| h.hash_seed);
                z.table = Some(LadderShm(t));
            }
            Ok((t, Some(entries))) => {
                ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_ladder \"{}\": room for {entries} clients of {BYTES_PER_CLIENT} bytes", z.name);
                z.seed = t.with(|h, _, _| h.hash_seed);
                z.table = Some(LadderShm(t));
            }
            Err(e) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "crawlward_ladder \"{}\" {e}: each client takes {BYTES_PER_CLIENT} bytes, and at least 16 fit", z.name);
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
        }
        NGX_OK as ngx_int_t
    })
}
