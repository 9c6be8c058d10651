//! Signed agents (`crawlward_signatures keys=FILE [skew=60s];`): the keys
//! of the agents' directories, read when the configuration is, and the
//! clock skew a signature's window allows. The check is
//! `crawlward_policy::signature`; the request path is `request::signature`.

use crate::conf::directive::{args, conf_error, conf_ok, text, IS_DUPLICATE};
use crate::conf::MainConf;
use crawlward_policy::signature::{KeyRing, Settings, MAX_SKEW_S};
use ngx::ffi::{ngx_conf_full_name, ngx_conf_t, NGX_LOG_EMERG};
use ngx::ngx_conf_log_error;
use std::ffi::{c_char, c_void};

/// What the signature check runs by.
pub struct Signatures {
    pub keys: KeyRing,
    pub settings: Settings,
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
        let mut settings = Settings::default();
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
            } else {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "invalid parameter \"{w}\" in \"crawlward_signatures\" directive, expected keys=FILE and skew=TIME (at most {MAX_SKEW_S}s)"
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
                mcf.signatures = Some(Box::new(Signatures { keys, settings }));
                conf_ok()
            }
            Err(e) => {
                ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"crawlward_signatures\" directive: {e}");
                conf_error()
            }
        }
    })
}

/// `60s`, `60` or `1m` in seconds.
fn seconds(text: &str) -> Option<i64> {
    let (number, unit) = match text.strip_suffix('s') {
        Some(n) => (n, 1),
        None => text.strip_suffix('m').map_or((text, 1), |n| (n, 60)),
    };
    number.parse::<i64>().ok().filter(|n| *n >= 0).map(|n| n * unit)
}
