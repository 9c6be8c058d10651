//! The files `crawlward render` writes, and the options that change their paths.

pub const HTTP_FILE: &str = "crawlward-http.conf";
pub const SERVER_FILE: &str = "crawlward-server.conf";
pub const LIMITS_FILE: &str = "crawlward-limits.conf";
pub const ROBOTS_FILE: &str = "robots.txt";
pub const CATALOGUE_FILE: &str = "crawlward-catalogue.json";
/// The Web Bot Auth keys the module loads, when `module.signatures` is set.
pub const SIGNATURE_KEYS_FILE: &str = "crawlward-signature-keys.json";
/// The API keys' hashes, accounts and tiers the module loads, when `api_tiers.keys` is set.
pub const API_KEYS_FILE: &str = "crawlward-api-keys.json";

/// Options that change paths, not decisions.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Prefix every absolute runtime path of the policy with this directory
    /// (like DESTDIR): for tests and `crawlward check`.
    pub root: Option<String>,
}

impl RenderOptions {
    pub fn path(&self, p: &str) -> String {
        match &self.root {
            Some(root) => format!("{}{}", root.trim_end_matches('/'), p),
            None => p.to_string(),
        }
    }
}
