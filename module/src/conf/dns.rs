//! `crawlward_dns_cache`: the DNS check's settings and its verdict cache's
//! zone. The check itself runs on the request path (`request::dns`).

use crate::conf::directive::add_zone;
use crate::state::dns_cache::{Cache, LAYOUT};
use crate::state::shm::{Opened, Table};
use crawlward_policy::fcrdns::{self, DnsSettings, Unresolved};
use crawlward_policy::verdict_cache::{self, Entry, Header};
use ngx::ffi::{ngx_conf_t, ngx_int_t, ngx_shm_zone_t, NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_OK};
use ngx::{ngx_conf_log_error, ngx_log_error};
use std::ffi::c_void;

/// From `crawlward_dns_cache`.
pub struct DnsConf {
    pub zone_name: String,
    pub settings: DnsSettings,
    pub unresolved: Unresolved,
    /// The table in the zone, set by the zone's init before workers start.
    pub cache: Option<Cache>,
}

/// The zone's init: in the master, at start and on every reload, before workers fork.
/// A zone kept over a reload (same name and size) keeps its verdicts.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, _old_data: *mut c_void) -> ngx_int_t {
    crate::base::guard(ngx::ffi::NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls init with this cycle's zone, whose data is our boxed DnsConf.
        let log = unsafe { (*zone).shm.log };
        // SAFETY: as above.
        let data = unsafe { (*zone).data } as *mut DnsConf;
        // SAFETY: as above.
        let dns = unsafe { &mut *data };
        let hash_seed = crawlward_policy::random_u64();
        // SAFETY: the zone nginx passes to its init.
        let opened = unsafe {
            Table::open(
                zone,
                &LAYOUT,
                verdict_cache::layout,
                Header::EMPTY,
                || Entry::EMPTY,
                |h, b, e| {
                    verdict_cache::Table::init(h, b, e, hash_seed);
                    Ok(())
                },
            )
        };
        match opened.and_then(Opened::fixed) {
            Ok((t, None)) => dns.cache = Some(Cache(t)),
            Ok((t, Some(entries))) => {
                ngx_log_error!(NGX_LOG_NOTICE, log, "crawlward_dns_cache zone \"{}\": room for {entries} verdicts", dns.zone_name);
                dns.cache = Some(Cache(t));
            }
            Err(e) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "crawlward_dns_cache zone \"{}\" {e}", dns.zone_name);
                return ngx::ffi::NGX_ERROR as ngx_int_t;
            }
        }
        NGX_OK as ngx_int_t
    })
}

/// `crawlward_dns_cache zone=name:size [verified=time] [spoofed=time] [unresolved=time] [stale_verified=time|off]
/// [max_lookups=number] [lookups_per_address=number] [lookups_per_network=number]
/// [unresolved_as=unverified|spoofed];`: the check's settings its words give, and its zone,
/// the shared memory added. None (logged) on a bad word.
///
/// # Safety
/// `cf` must be the configuration being parsed, inside a directive handler.
pub unsafe fn declare(cf: *mut ngx_conf_t, args: &[String]) -> Option<Box<DnsConf>> {
    let mut settings = DnsSettings::default();
    let mut unresolved = Unresolved::Unverified;
    let mut zone = None;
    for arg in args {
        let bad = |why: &str| {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{arg}\" in \"crawlward_dns_cache\" directive: {why}");
            None
        };
        let Some((key, value)) = arg.split_once('=') else { return bad("expected name=value") };
        match key {
            "zone" => zone = Some(value.to_string()),
            "stale_verified" if value == "off" => settings.stale_verified = 0,
            "verified" | "spoofed" | "unresolved" | "stale_verified" => {
                let Some(ms) = fcrdns::parse_time(value).filter(|ms| *ms >= 1000) else {
                    return bad(if key == "stale_verified" {
                        "expected a time from 1s to 365d, e.g. 6h, or off"
                    } else {
                        "expected a time from 1s to 365d, e.g. 1h"
                    });
                };
                *match key {
                    "verified" => &mut settings.valid_verified,
                    "spoofed" => &mut settings.valid_spoofed,
                    "unresolved" => &mut settings.valid_unresolved,
                    _ => &mut settings.stale_verified,
                } = ms;
            }
            "max_lookups" | "lookups_per_address" | "lookups_per_network" => match value.parse::<u32>() {
                Ok(n) if n >= 1 => {
                    *match key {
                        "max_lookups" => &mut settings.max_lookups,
                        "lookups_per_address" => &mut settings.lookups_per_address,
                        _ => &mut settings.lookups_per_network,
                    } = n
                }
                _ => return bad("expected a number of lookups, at least 1"),
            },
            "unresolved_as" => match Unresolved::parse(value) {
                Some(u) => unresolved = u,
                None => return bad("expected unverified or spoofed"),
            },
            _ => return bad("unknown parameter"),
        }
    }
    let Some(zone_arg) = zone else {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_dns_cache\" directive needs zone=name:size");
        return None;
    };
    // boxed: the zone's data points at it while the conf is being read
    let mut dns = Box::new(DnsConf { zone_name: String::new(), settings, unresolved, cache: None });
    let data: *mut DnsConf = &mut *dns;
    // SAFETY: inside a directive handler; the box lives in the main conf as long as the cycle.
    let (shm, name) = unsafe { add_zone(cf, &LAYOUT, &zone_arg, data.cast()) }?;
    // SAFETY: shm is a valid entry of the cycle's shared memory list.
    unsafe { (*shm).init = Some(init_zone) };
    dns.zone_name = name;
    Some(dns)
}
