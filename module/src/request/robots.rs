//! `crawlward_robots_kept DIR;`: robots.txt when the application cannot
//! answer it (`robots.source: app`). The application's newest plain-text
//! answer is kept only when it reads as robots.txt; then the kept copy, else
//! the rendered file, is answered with 200. The choice is
//! `crawlward_policy::robots_txt::kept_answer`, tested without nginx.

use crate::conf::directive::{args, conf_error, conf_ok, text};
use crate::conf::{core_loc_conf_of_cf, LocConf};
use crate::request::ext::confs;
use crate::request::status::{answer_get, send_body};
use ngx::ffi::{ngx_command_t, ngx_conf_t, ngx_http_request_t, ngx_int_t, NGX_DECLINED, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_NOT_FOUND, NGX_LOG_ERR};
use ngx::http::Request;
use ngx::ngx_log_error;
use std::ffi::{c_char, c_void};
use std::path::PathBuf;

pub unsafe extern "C" fn set_robots_kept(cf: *mut ngx_conf_t, _cmd: *mut ngx_command_t, conf: *mut c_void) -> *mut c_char {
    crate::base::guard(conf_error(), || {
        // SAFETY: conf is our LocConf (the directive's conf offset is the location conf).
        let lcf = unsafe { &mut *(conf as *mut LocConf) };
        if !lcf.robots_kept.is_null() {
            return c"is duplicate".as_ptr() as *mut c_char;
        }
        // SAFETY: inside a directive handler; the directive takes one argument.
        let dir = PathBuf::from(text(&unsafe { args(cf) }[1]));
        // SAFETY: the cycle's pool outlives every request of the cycle; allocate registers a
        // cleanup that drops the path with it.
        let p = unsafe { crate::conf::directive::conf_pool(cf) }.allocate(dir);
        if p.is_null() {
            return conf_error();
        }
        lcf.robots_kept = p;
        // SAFETY: in a location block, cf->ctx is that location's http conf ctx.
        unsafe { core_loc_conf_of_cf(cf) }.handler = Some(robots_kept_handler);
        conf_ok()
    })
}

unsafe extern "C" fn robots_kept_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    crate::base::guard(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t, || {
        // SAFETY: nginx calls content handlers with a live request of this http block.
        answer_robots(unsafe { Request::from_ngx_http_request(r) })
    })
}

fn answer_robots(r: &mut Request) -> ngx_int_t {
    if let Err(rc) = answer_get(r) {
        return rc;
    }
    // SAFETY: a live request of this http block; the confs are not kept.
    let (_, lcf) = unsafe { confs(r) };
    let Some(dir) = lcf.robots_kept_dir() else { return NGX_DECLINED as ngx_int_t };
    match crawlward_policy::robots_txt::kept_answer(dir) {
        // the status is set here, 200, whatever error_page led here
        Some(body) => send_body(r, &body, b"text/plain; charset=utf-8"),
        None => {
            ngx_log_error!(NGX_LOG_ERR, r.log(), "crawlward_robots_kept: neither a kept copy nor the rendered robots.txt can be read in \"{}\"", dir.display());
            NGX_HTTP_NOT_FOUND as ngx_int_t
        }
    }
}
