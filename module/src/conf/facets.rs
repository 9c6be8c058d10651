//! `crawlward_facets`: the facet guard on browse pages (layer 2 of heratio.org's guide),
//! decided by `crawlward_policy::query::FacetGuard` on the parsed query
//! string and Referer.

use crate::conf::directive::{args, conf_error, conf_ok, text};
use crate::conf::LocConf;
use crawlward_policy::query::{facet_name_owned, form_decode, FacetGuard, MAX_DISTINCT};
use ngx::ffi::{ngx_command_t, ngx_conf_t, NGX_LOG_EMERG, NGX_LOG_WARN};
use ngx::ngx_conf_log_error;
use std::ffi::{c_char, c_void};

/// `crawlward_facets names=a,b [prefixes=p_,q_] [crawler_max_params=4]
/// [max_facets_without_referer=2] [same_site=host,host] [exempt_verified=on|off]
/// [retry_after=30] [paths=/a,/b] | off;`, named and defaulted as the policy's
/// `browse_shed`.
pub unsafe extern "C" fn set_facets(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf (the directive's conf offset is the location conf).
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if lcf.facets_set != -1 {
            return c"is duplicate".as_ptr() as *mut c_char;
        }
        // SAFETY: inside a directive handler.
        let words: Vec<String> = unsafe { args(cf) }.iter().skip(1).map(text).collect();
        if words == ["off"] {
            lcf.facets_set = 0;
            return conf_ok();
        }
        let mut g = FacetGuard::default();
        for w in &words {
            let bad = |why: &str| {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "invalid parameter \"{w}\" in \"crawlward_facets\" directive: {why}");
                conf_error()
            };
            let Some((key, value)) = w.split_once('=') else { return bad("expected name=value, or off") };
            let list = || value.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>();
            // names as a URL writes them: "place+name" or "place%20name" is "place name"
            let decoded = || {
                list()
                    .iter()
                    .map(|n| {
                        let mut out = Vec::new();
                        form_decode(n.as_bytes(), &mut out, n.len());
                        String::from_utf8_lossy(&out).into_owned()
                    })
                    .collect::<Vec<_>>()
            };
            let number = || value.parse::<u32>().ok().filter(|n| *n >= 1);
            // the names before they followed the policy's browse_shed: still
            // read, with a warning, so that an upgrade passes `nginx -t`
            let key = match key {
                "max_params" | "max_facets" => {
                    let now = if key == "max_params" { "crawler_max_params" } else { "max_facets_without_referer" };
                    // SAFETY: cf is the handler's own, live for the call.
                    unsafe { deprecated(cf, key, now) };
                    now
                }
                _ => key,
            };
            match key {
                "names" => g.facets.names = decoded().iter().map(|n| facet_name_owned(n)).collect(),
                "prefixes" => g.facets.prefixes = decoded(),
                "paths" => match list() {
                    p if p.iter().all(|x| x.starts_with('/')) => g.paths = p,
                    _ => return bad("expected path prefixes starting with /"),
                },
                "same_site" => g.same_site_hosts = list().into_iter().map(|h| h.to_ascii_lowercase()).collect(),
                "crawler_max_params" => match number() {
                    Some(n) => g.crawler_max_params = n,
                    None => return bad("expected a number, at least 1"),
                },
                "max_facets_without_referer" => match number().filter(|n| *n as usize <= MAX_DISTINCT) {
                    Some(n) => g.max_facets_without_referer = n,
                    None => return bad("expected a number from 1 to 16"),
                },
                "retry_after" => match number() {
                    Some(n) => g.retry_after = n,
                    None => return bad("expected seconds, at least 1"),
                },
                "exempt_verified" => match value {
                    "on" => g.exempt_verified = true,
                    "off" => g.exempt_verified = false,
                    _ => return bad("expected on or off"),
                },
                _ => return bad("unknown parameter"),
            }
        }
        if g.facets.names.is_empty() && g.facets.prefixes.is_empty() {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_facets\" directive needs names= or prefixes=");
            return conf_error();
        }
        // SAFETY: the cycle's pool outlives every request of the cycle; allocate registers a
        // cleanup that drops the guard with it.
        let pool = unsafe { crate::conf::directive::conf_pool(cf) };
        let p = pool.allocate(g);
        if p.is_null() {
            return conf_error();
        }
        lcf.facets = p;
        lcf.facets_set = 1;
        conf_ok()
    })
}

/// Warn, as nginx does for a renamed parameter, that `old=` is now `new=`.
///
/// # Safety
/// `cf` must be the configuration being parsed, as nginx gave it to the handler.
unsafe fn deprecated(cf: *mut ngx_conf_t, old: &str, new: &str) {
    ngx_conf_log_error!(NGX_LOG_WARN, cf, "the \"{old}=\" parameter of the \"crawlward_facets\" directive is deprecated, use \"{new}=\" instead");
}
