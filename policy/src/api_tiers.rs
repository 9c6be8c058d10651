//! `api_tiers`, checked: the metered doors, where the account comes from,
//! the tiers, and the keys file (read by [`crate::validate::load_with`]).

use crate::checks::{check_path, check_zone_size, problem};
use crate::model::ApiTiers;
use crate::quota::{KeyEntry, KeysFile, Tier, ACCOUNT_MAX, DEFAULT_HOURLY, MAX_TIERS};
use crate::Problem;

/// `api_tiers`, checked, with its defaults.
#[derive(Debug, Clone)]
pub struct ApiTiersV {
    pub paths: Vec<String>,
    pub account: Vec<String>,
    /// Whether the accounts of `account` are folded (`account_names: folded`):
    /// compared without ASCII case and insignificant spaces; by default exactly.
    pub account_names_folded: bool,
    pub tier: Option<String>,
    /// The keys file as written (relative to the policy file), and its keys once read.
    pub keys_file: Option<String>,
    pub keys: Vec<KeyEntry>,
    /// What the keys file gave that is taken otherwise (an account in two tiers), as warnings.
    pub key_conflicts: Vec<String>,
    pub key_header: String,
    pub default: String,
    pub zone_size: String,
    pub tiers: Vec<Tier>,
}

fn variable(v: &str) -> bool {
    v.strip_prefix('$').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

pub(crate) fn check(a: &ApiTiers, problems: &mut Vec<Problem>) -> ApiTiersV {
    if a.paths.is_empty() {
        problem(problems, "api_tiers.paths", "name the metered doors, e.g. [/api/v2/]");
    }
    for (i, p) in a.paths.iter().enumerate() {
        let at = format!("api_tiers.paths[{i}]");
        if check_path(p, &at, problems) && p.contains(',') {
            problem(problems, at, format!("\"{p}\" has a ',': the module's crawlward_quota lists the doors separated by commas"));
        }
    }
    for (i, v) in a.account.iter().enumerate() {
        if !variable(v) {
            problem(problems, format!("api_tiers.account[{i}]"), format!("invalid variable \"{v}\": expected a variable, e.g. $remote_user"));
        }
    }
    let account_names_folded = match a.account_names.as_deref() {
        None | Some("exact") => false,
        Some("folded") => true,
        Some(other) => {
            problem(problems, "api_tiers.account_names", format!("invalid value \"{other}\": exact or folded"));
            false
        }
    };
    if let Some(v) = a.tier.as_ref().filter(|v| !variable(v)) {
        problem(problems, "api_tiers.tier", format!("invalid variable \"{v}\": expected a variable, e.g. $api_tier"));
    }
    if a.account.is_empty() && a.keys.is_none() {
        problem(problems, "api_tiers", "say where the account comes from: account (variables the server sets) or keys (a keys file)");
    }
    let key_header = a.key_header.clone().unwrap_or_else(|| "X-API-Key".into());
    if key_header.is_empty() || !key_header.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        problem(problems, "api_tiers.key_header", format!("invalid header name \"{key_header}\": letters, digits and '-'"));
    }
    let mut tiers: Vec<Tier> = Vec::new();
    if a.tiers.is_empty() {
        problem(problems, "api_tiers.tiers", "give at least one tier, e.g. {name: standard, hourly: 1000}");
    }
    if a.tiers.len() > MAX_TIERS {
        problem(problems, "api_tiers.tiers", format!("at most {MAX_TIERS} tiers"));
    }
    for (i, t) in a.tiers.iter().enumerate() {
        let at = format!("api_tiers.tiers[{i}]");
        if !crate::quota::valid_tier_name(&t.name) {
            problem(problems, format!("{at}.name"), format!("invalid tier name \"{}\": use a-z, 0-9, _ and -, up to 32", t.name));
        }
        if tiers.iter().any(|x| x.name == t.name) {
            problem(problems, format!("{at}.name"), format!("duplicate tier \"{}\"", t.name));
        }
        if t.hourly == Some(0) || t.daily == Some(0) {
            problem(problems, at.clone(), "hourly and daily must be at least 1");
        }
        tiers.push(Tier { name: t.name.clone(), hourly: t.hourly.unwrap_or(DEFAULT_HOURLY).max(1), daily: t.daily.map(|d| d.max(1)) });
    }
    let default = a.default.clone().or_else(|| tiers.first().map(|t| t.name.clone())).unwrap_or_default();
    if !tiers.is_empty() && !tiers.iter().any(|t| t.name == default) {
        problem(problems, "api_tiers.default", format!("no tier \"{default}\""));
    }
    let zone_size = a.zone_size.clone().unwrap_or_else(|| "1m".into());
    check_zone_size(&zone_size, "api_tiers.zone_size", problems);
    ApiTiersV {
        paths: a.paths.clone(),
        account: a.account.clone(),
        account_names_folded,
        tier: a.tier.clone(),
        keys_file: a.keys.clone(),
        keys: Vec::new(),
        key_conflicts: Vec::new(),
        key_header,
        default,
        zone_size,
        tiers,
    }
}

impl ApiTiersV {
    /// Read the keys file (YAML: `keys:` a list of `account`, `tier` and
    /// `sha256`, the key's SHA-256 in hex; never the key itself), relative to
    /// `base`. Errors say which entry and what is wrong.
    pub fn read_keys(&mut self, base: &std::path::Path) -> Result<(), String> {
        let Some(file) = &self.keys_file else { return Ok(()) };
        let path = base.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read the keys file {}: {e}", path.display()))?;
        let keys: KeysFile = serde_yaml::from_str(&text).map_err(|e| format!("keys file {}: {e}", path.display()))?;
        let names: Vec<String> = self.tiers.iter().map(|t| t.name.clone()).collect();
        let json = serde_json::to_vec(&keys).map_err(|e| e.to_string())?;
        let parsed = crate::quota::Keys::parse(&json, &names).map_err(|e| format!("keys file {}: {e}", path.display()))?;
        self.key_conflicts = parsed.conflicts().iter().map(|c| format!("keys file {}: {c}", path.display())).collect();
        for k in &keys.keys {
            if k.account.len() > ACCOUNT_MAX || !k.account.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!("keys file {}: account \"{}\": printable ASCII without spaces, up to {ACCOUNT_MAX}", path.display(), k.account));
            }
        }
        self.keys = keys.keys;
        Ok(())
    }
}
