//! nginx cfg flags for the module, from the metadata nginx-sys exports for
//! the nginx tree it was built against: `ngx_feature="..."` for each enabled
//! feature, `ngx_os="..."`, and version gates such as `nginx1_23_0`.

use std::env;

/// nginx versions the code checks for; each becomes `cfg(nginxX_Y_Z)` when the tree is at least that.
const VERSION_GATES: &[(&str, u64)] = &[
    // repeated request headers chained through ngx_table_elt_t.next
    ("nginx1_23_0", 1_023_000),
    // ngx_resolver_t's ipv4 and ipv6 as bit fields (resolver ipv4=off)
    ("nginx1_23_1", 1_023_001),
];

fn main() {
    for var in ["DEP_NGINX_FEATURES", "DEP_NGINX_FEATURES_CHECK", "DEP_NGINX_OS", "DEP_NGINX_OS_CHECK", "DEP_NGINX_VERSION_NUMBER"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    declare("ngx_feature", env::var("DEP_NGINX_FEATURES_CHECK").ok());
    declare("ngx_os", env::var("DEP_NGINX_OS_CHECK").ok());
    for feature in env::var("DEP_NGINX_FEATURES").unwrap_or_default().split(',').filter(|f| !f.is_empty()) {
        println!("cargo::rustc-cfg=ngx_feature=\"{feature}\"");
    }
    if let Ok(os) = env::var("DEP_NGINX_OS") {
        println!("cargo::rustc-cfg=ngx_os=\"{os}\"");
    }
    let version: u64 = env::var("DEP_NGINX_VERSION_NUMBER").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for (gate, at_least) in VERSION_GATES {
        println!("cargo::rustc-check-cfg=cfg({gate})");
        if version >= *at_least {
            println!("cargo::rustc-cfg={gate}");
        }
    }
}

fn declare(name: &str, values: Option<String>) {
    match values {
        Some(v) if !v.is_empty() => println!("cargo::rustc-check-cfg=cfg({name}, values({v}))"),
        _ => println!("cargo::rustc-check-cfg=cfg({name}, values(any()))"),
    }
}
