//! `$crawlward_agent`, `$crawlward_operator`, `$crawlward_purpose`,
//! `$crawlward_verdict`, `$crawlward_action`, `$crawlward_dns`,
//! `$crawlward_dns_cache`, `$crawlward_params`, `$crawlward_facets`,
//! `$crawlward_facet_rule`, `$crawlward_budget`: what the module decided, for
//! `map`, `limit_req` keys and `log_format`. They may be read before the
//! module's preaccess handler (a `map` in the rewrite phase), so each
//! computes the identification on demand.

use crate::handler::{confs, identify};
use ngx::ffi::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_conf_ctx_t, ngx_http_core_main_conf_t, ngx_http_core_module, ngx_http_request_t, ngx_int_t,
    ngx_str_t, ngx_variable_value_t, NGX_ERROR, NGX_HTTP_VAR_CHANGEABLE, NGX_HTTP_VAR_NOCACHEABLE, NGX_OK,
};

const AGENT: usize = 0;
const OPERATOR: usize = 1;
const PURPOSE: usize = 2;
const VERDICT: usize = 3;
const ACTION: usize = 4;
const DNS: usize = 5;
const DNS_CACHE: usize = 6;
const PARAMS: usize = 7;
const FACETS: usize = 8;
const FACET_RULE: usize = 9;
const BUDGET: usize = 10;

/// Each variable, and whether its value can change during the request: on a
/// DNS cache miss the verdict (and so the action) is provisional until the
/// lookup ends in the access phase, so those are read afresh each time (the
/// access log then shows the final ones).
const NAMES: [(&str, usize, bool); 11] = [
    ("crawlward_agent", AGENT, false),
    ("crawlward_operator", OPERATOR, false),
    ("crawlward_purpose", PURPOSE, false),
    ("crawlward_verdict", VERDICT, true),
    ("crawlward_action", ACTION, true),
    ("crawlward_dns", DNS, true),
    ("crawlward_dns_cache", DNS_CACHE, true),
    ("crawlward_params", PARAMS, true),
    ("crawlward_facets", FACETS, true),
    ("crawlward_facet_rule", FACET_RULE, true),
    ("crawlward_budget", BUDGET, true),
];

pub unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::guard(NGX_ERROR as ngx_int_t, || {
        for (name, which, changes) in NAMES {
            let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
            // CHANGEABLE: a policy rendered for stock nginx defines the same names with `map`,
            // which then takes the variable over, so loading the module does not break it.
            // The others are cacheable: a request is identified once (see handler::identify).
            let flags = NGX_HTTP_VAR_CHANGEABLE | if changes { NGX_HTTP_VAR_NOCACHEABLE } else { 0 };
            // SAFETY: nginx copies the name; in preconfiguration the variables hash is being built.
            let v = unsafe { ngx_http_add_variable(cf, &mut n, flags as usize) };
            if v.is_null() {
                return NGX_ERROR as ngx_int_t;
            }
            // SAFETY: v is the variable nginx just added for us.
            unsafe {
                (*v).get_handler = Some(get);
                (*v).data = which;
            }
        }
        NGX_OK as ngx_int_t
    })
}

/// The least `variables_hash_max_size` with the module loaded.
///
/// nginx's variables hash holds every variable defined: the core's, each loaded
/// module's (Debian's dynamic modules add dozens), this module's, and one per map a
/// configuration renders. With nginx's default of 1024, a configuration near that
/// load makes `nginx -t` warn "could not build optimal variables_hash", and loading
/// this module (as the Debian package does for every site) must not add a warning
/// to a configuration that had none. A larger maximum only lets nginx try larger
/// tables: it still takes the smallest that fits.
pub const VARIABLES_HASH_MIN: usize = 4096;

/// Raises `variables_hash_max_size` to [`VARIABLES_HASH_MIN`] when it is lower; a
/// larger value, whoever set it, is kept. Called in postconfiguration, after the
/// http block is read (so the sysadmin's own setting is in, and setting it is no
/// duplicate) and before nginx builds the hash.
///
/// # Safety
/// `cf` must be the http block's conf in postconfiguration.
pub unsafe fn make_room(cf: *mut ngx_conf_t) {
    // SAFETY: per the contract, cf->ctx is the http conf ctx, whose main_conf holds the
    // core module's main conf at its ctx_index.
    unsafe {
        let ctx = (*cf).ctx as *mut ngx_http_conf_ctx_t;
        let cmcf = *(*ctx).main_conf.add(ngx_http_core_module.ctx_index) as *mut ngx_http_core_main_conf_t;
        if (*cmcf).variables_hash_max_size < VARIABLES_HASH_MIN {
            (*cmcf).variables_hash_max_size = VARIABLES_HASH_MIN;
        }
    }
}

fn set(v: *mut ngx_variable_value_t, value: &[u8], changes: bool) {
    // SAFETY: nginx passes a value slot to fill; `value` points at conf or static memory that
    // outlives the request (agent names live in the cycle's conf).
    unsafe {
        (*v).data = value.as_ptr() as *mut u8;
        (*v).set_len(value.len() as u32);
        (*v).set_valid(1);
        (*v).set_no_cacheable(changes as u32);
        (*v).set_not_found(0);
    }
}

unsafe extern "C" fn get(r: *mut ngx_http_request_t, v: *mut ngx_variable_value_t, which: usize) -> ngx_int_t {
    crate::guard(NGX_ERROR as ngx_int_t, || {
        // SAFETY: nginx evaluates variables for live requests of this http block.
        let (id, mcf) = unsafe { (identify(r), confs(r).0) };
        let (Some(id), Some(identity)) = (id, mcf.identity.as_ref()) else {
            // SAFETY: as in set().
            unsafe { (*v).set_not_found(1) };
            return NGX_OK as ngx_int_t;
        };
        if which >= PARAMS {
            // known once the access phase ran the facet guard and the budgets; empty before
            // SAFETY: as above.
            let found = unsafe { crate::handler::limited(r) }.unwrap_or_default();
            let value = match which {
                PARAMS => found.facet.map(|f| f.scan.params.to_string()),
                FACETS => found.facet.map(|f| f.scan.facets.to_string()),
                FACET_RULE => found.facet.and_then(|f| f.rule).map(|r| r.as_str().to_string()),
                _ => found.budget.map(|b| format!("{}{}", b.budget.as_str(), if b.deep { "-deep" } else { "" })),
            }
            .unwrap_or_default();
            // SAFETY: the value is copied into the request's pool, which outlives its use.
            let data = unsafe { ngx::ffi::ngx_pnalloc((*r).pool, value.len().max(1)) } as *mut u8;
            if data.is_null() {
                return NGX_ERROR as ngx_int_t;
            }
            // SAFETY: data has room for value.len() bytes.
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), data, value.len()) };
            // SAFETY: data holds value.len() bytes for the request's life.
            set(v, unsafe { std::slice::from_raw_parts(data, value.len()) }, true);
            return NGX_OK as ngx_int_t;
        }
        let agent = id.agent.map(|i| &identity.catalogue.agents()[i]);
        let value: &[u8] = match which {
            AGENT => agent.map_or(&b""[..], |a| a.name.as_bytes()),
            OPERATOR => agent.map_or(&b""[..], |a| a.operator.as_bytes()),
            PURPOSE => agent.map_or(&b""[..], |a| a.purpose.as_str().as_bytes()),
            VERDICT => id.verdict.as_str().as_bytes(),
            ACTION => id.action.as_str().as_bytes(),
            DNS => id.dns.map_or(&b""[..], |d| d.as_str().as_bytes()),
            DNS_CACHE => id.dns_source.as_str().as_bytes(),
            _ => &b""[..],
        };
        set(v, value, which >= VERDICT);
        NGX_OK as ngx_int_t
    })
}
