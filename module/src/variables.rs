//! `$crawlward_agent`, `$crawlward_operator`, `$crawlward_purpose`,
//! `$crawlward_verdict`, `$crawlward_action`: what the module decided, for
//! `map`, `limit_req` keys and `log_format`. They may be read before the
//! access phase (a `limit_req` key is built in preaccess), so each computes
//! the identification on demand.

use crate::handler::{confs, identify};
use ngx::ffi::{ngx_conf_t, ngx_http_add_variable, ngx_http_request_t, ngx_int_t, ngx_str_t, ngx_variable_value_t, NGX_ERROR, NGX_HTTP_VAR_CHANGEABLE, NGX_OK};

const AGENT: usize = 0;
const OPERATOR: usize = 1;
const PURPOSE: usize = 2;
const VERDICT: usize = 3;
const ACTION: usize = 4;

const NAMES: [(&str, usize); 5] = [
    ("crawlward_agent", AGENT),
    ("crawlward_operator", OPERATOR),
    ("crawlward_purpose", PURPOSE),
    ("crawlward_verdict", VERDICT),
    ("crawlward_action", ACTION),
];

pub unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    crate::guard(NGX_ERROR as ngx_int_t, || {
        for (name, which) in NAMES {
            let mut n = ngx_str_t { len: name.len(), data: name.as_ptr() as *mut u8 };
            // CHANGEABLE: a policy rendered for stock nginx defines the same names with `map`,
            // which then takes the variable over, so loading the module does not break it.
            // Cacheable: a request is decided once (see handler::identify).
            // SAFETY: nginx copies the name; in preconfiguration the variables hash is being built.
            let v = unsafe { ngx_http_add_variable(cf, &mut n, NGX_HTTP_VAR_CHANGEABLE as usize) };
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

fn set(v: *mut ngx_variable_value_t, value: &[u8]) {
    // SAFETY: nginx passes a value slot to fill; `value` points at conf or static memory that
    // outlives the request (agent names live in the cycle's conf).
    unsafe {
        (*v).data = value.as_ptr() as *mut u8;
        (*v).set_len(value.len() as u32);
        (*v).set_valid(1);
        (*v).set_no_cacheable(0);
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
        let agent = id.agent.map(|i| &identity.catalogue.agents()[i]);
        let value: &[u8] = match which {
            AGENT => agent.map_or(&b""[..], |a| a.name.as_bytes()),
            OPERATOR => agent.map_or(&b""[..], |a| a.operator.as_bytes()),
            PURPOSE => agent.map_or(&b""[..], |a| a.purpose.as_str().as_bytes()),
            VERDICT => id.verdict.as_str().as_bytes(),
            _ => id.action.as_str().as_bytes(),
        };
        set(v, value);
        NGX_OK as ngx_int_t
    })
}
