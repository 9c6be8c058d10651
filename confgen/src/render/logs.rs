//! What the logs say: why crawlward refused, the Retry-After of each
//! refusal, which requests the throttle log keeps, and the two log formats.

use crate::nginx::Map;
use crawlward_policy::Policy;

/// Why crawlward refused: from the status and what each layer recorded.
/// (With the module, the module decides it: `layers::Layers::refusal`.)
pub fn refusal_map() -> Map {
    let key = "$status:$crawlward_action:$crawlward_maintenance:$crawlward_facet:$limit_req_status:$limit_conn_status";
    let mut m = Map::new("", key, "$crawlward_refusal", "");
    m.comment.clear();
    m.regex("^444:block-444:", "bot-blocker");
    m.regex("^403:block-403:", "bot-blocker");
    m.regex("^503:[^:]*:on:", "maintenance");
    m.regex("^429:[^:]*::facet", "facet");
    m.regex("^429:[^:]*:::REJECTED:", "rate");
    m.regex("^503:[^:]*::[^:]*:[^:]*:REJECTED$", "browse-cap");
    m
}

pub fn retry_map(policy: &Policy) -> Map {
    let mut m = Map::new("Retry-After for each refusal: when trying again makes sense.", "$crawlward_refusal", "$crawlward_retry_after", "");
    if let Some(mt) = &policy.maintenance {
        m.entry("maintenance", mt.retry_after.to_string());
    }
    if let Some(b) = &policy.browse {
        m.entry("facet", b.retry_after.to_string());
        m.entry("browse-cap", b.retry_after.to_string());
    }
    if let Some(rl) = &policy.rate_limits {
        m.entry("rate", rl.retry_after.to_string());
    }
    m
}

pub fn throttled_map() -> Map {
    let mut m = Map::new("Requests the throttle log keeps: 429s and browse-cap 503s.", "$crawlward_refusal", "$crawlward_throttled", "0");
    for r in ["facet", "rate", "browse-cap"] {
        m.entry(r, "1");
    }
    m
}

pub fn log_format(policy: &Policy) -> String {
    if policy.module.is_some() {
        LOG_FORMAT
            .replace("facet=$crawlward_facet ", "facet=$crawlward_facet_rule ")
            .replace("class=$crawlward_limit_class '", "class=$crawlward_limit_class budget=$crawlward_budget '")
    } else {
        LOG_FORMAT.to_string()
    }
}

/// The site's access log for `crawlward analyze`: nginx's `combined` (so any
/// tool that reads combined still does), then what crawlward decided and what
/// the request cost, as `key=value` fields.
///
/// With the module, its fields come from one variable, `$crawlward_log_fields`,
/// which writes `agent=... verdict=... action=... refusal=... facets=...
/// budget=...` exactly as the six variables would: one variable read a
/// request instead of six. With the ladder, the client's rung, score and
/// each sub-score's contribution follow in it ("log the score contributions,
/// never just the verdict").
pub fn analyze_log_format(policy: &Policy) -> String {
    let fields = if policy.module.is_some() {
        "$crawlward_log_fields"
    } else {
        "agent=$crawlward_agent verdict=$crawlward_verdict '\n    'action=$crawlward_action refusal=$crawlward_refusal"
    };
    format!(
        "log_format {ANALYZE_LOG_FORMAT} '$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent '\n    '\"$http_referer\" \"$http_user_agent\" '\n    'rt=$request_time urt=\"$upstream_response_time\" {fields}';"
    )
}

/// The name of the access-log format `crawlward analyze` reads.
pub const ANALYZE_LOG_FORMAT: &str = "crawlward_combined";

const LOG_FORMAT: &str = "log_format crawlward '$remote_addr [$time_local] \"$request\" $status '\n    'agent=\"$crawlward_agent\" purpose=$crawlward_purpose verdict=$crawlward_verdict '\n    'action=$crawlward_action refusal=$crawlward_refusal facet=$crawlward_facet class=$crawlward_limit_class '\n    'referer=\"$http_referer\" ua=\"$http_user_agent\"';";
