//! Catalogue feeds: public lists of crawlers, read into agents of the
//! catalogue's own form, so that `crawlward update-ranges` can keep the
//! catalogue current between releases.
//!
//! Two formats are read, told apart by their shape:
//!
//! - ai.robots.txt's `robots.json`: an object whose keys are the agents'
//!   User-Agent tokens, each with `operator`, `function` and `description`
//!   (github.com/ai-robots-txt/ai.robots.txt, MIT). An agent's purpose is
//!   read from its function: AI search, a user's assistant or agent, else the
//!   feed's default purpose (AI training unless the policy says otherwise).
//! - the versioned crawler-list format of AI-crawler SDKs: `version`,
//!   `ttl`, `policy`, and `agents`, each with `name`, `operator`,
//!   `purpose` (`training`, `search`, `user`, or a purpose of crawlward's),
//!   `ua` (a JavaScript regular expression, or `null` for a robots.txt-only
//!   token) and `ranges` (networks). Its `policy` and `robots` are the
//!   portal's and are not read: the actions are the crawlward policy's.
//!
//! A feed's regular expressions are read as product names when they can be
//! (`GPTBot`, `Googlebot\/`, `Bytespider|Bytedance`); one that cannot is
//! refused with the reason, and the rest of the feed is kept. Feed agents
//! add to the catalogue and never change it: an agent the catalogue (or the
//! policy) already names keeps its own entry, its verification included, and
//! a name the catalogue already holds stays its agent's
//! ([`crate::catalogue::Catalogue::add_feed_agents`]).

use crate::model::AgentSpec;
use crate::Purpose;
use serde::{Deserialize, Serialize};

/// Most agents read from one feed.
pub const MAX_AGENTS: usize = 5_000;

/// A feed as `crawlward update-ranges` keeps it (the last good copy), next
/// to the operators' range files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedFile {
    pub url: String,
    /// `ai.robots.txt` or `crawler-list`.
    pub format: String,
    /// When crawlward downloaded it (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<String>,
    /// The list's own version (crawler-list), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The agents, in the catalogue's form.
    pub agents: Vec<AgentSpec>,
    /// The entries not read, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// The file name a feed's kept copy is stored under.
pub fn file_name(url: &str) -> String {
    format!("feed-{}", crate::ranges::file_name(url))
}

/// Read a feed's body into agents; `default_purpose` is for ai.robots.txt
/// entries whose function names no other. The error says why the whole body
/// was not read (not JSON, neither format, too many agents).
pub fn parse(url: &str, body: &[u8], default_purpose: Purpose) -> Result<FeedFile, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the feed is not JSON: {e}"))?;
    let obj = v.as_object().ok_or("the feed is not a JSON object")?;
    let (format, version, entries): (&str, Option<String>, Vec<Result<AgentSpec, String>>) = match obj.get("agents") {
        Some(serde_json::Value::Array(list)) => {
            let version = obj.get("version").and_then(|x| x.as_str()).map(str::to_string);
            ("crawler-list", version, list.iter().map(|a| crawler_list_agent(url, a)).collect())
        }
        Some(_) => return Err("the feed's \"agents\" is not a list".into()),
        None if !obj.is_empty() && obj.values().all(|x| x.is_object()) => {
            ("ai.robots.txt", None, obj.iter().map(|(name, a)| ai_robots_agent(url, name, a, default_purpose)).collect())
        }
        None => return Err("the feed is neither ai.robots.txt's robots.json nor a crawler list (an object with \"agents\")".into()),
    };
    if entries.len() > MAX_AGENTS {
        return Err(format!("the feed has {} agents, more than {MAX_AGENTS}", entries.len()));
    }
    let mut agents = Vec::new();
    let mut refused = Vec::new();
    for e in entries {
        match e {
            Ok(a) if agents.iter().any(|b: &AgentSpec| b.name.eq_ignore_ascii_case(&a.name)) => refused.push(format!("{}: listed twice", a.name)),
            Ok(a) => agents.push(a),
            Err(why) => refused.push(why),
        }
    }
    Ok(FeedFile { url: url.to_string(), format: format.to_string(), fetched: None, version, agents, refused })
}

/// A name a feed gives, printable and cut short for a message.
fn shown(name: &str) -> String {
    let s: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    if name.chars().count() > 64 {
        format!("{s}...")
    } else {
        s
    }
}

fn ai_robots_agent(url: &str, name: &str, a: &serde_json::Value, default_purpose: Purpose) -> Result<AgentSpec, String> {
    if !crate::catalogue::valid_name(name) {
        return Err(format!("\"{}\": not a name of letters, digits, '.', '_' and '-'", shown(name)));
    }
    let text = |k: &str| a.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let function = text("function").to_ascii_lowercase();
    let description = text("description").to_ascii_lowercase();
    let purpose = if function.contains("search") {
        Purpose::AiSearch
    } else if ["assistant", "agent", "user"].iter().any(|w| function.contains(w)) {
        Purpose::AiUser
    } else if function.is_empty() && description.contains("search") {
        Purpose::AiSearch
    } else {
        default_purpose
    };
    let operator = markdown_text(&text("operator"));
    let ua = escape_literal(name);
    crate::catalogue::check_pattern(&ua).map_err(|e| format!("\"{name}\": {e}"))?;
    Ok(AgentSpec {
        name: name.to_string(),
        operator: Some(if operator.is_empty() || operator.starts_with("Unclear") { "unknown".into() } else { operator }),
        purpose: Some(purpose.as_str().to_string()),
        ua: Some(ua),
        robots_only: None,
        robots_token: None,
        ranges_url: None,
        ranges: None,
        ranges_as_of: None,
        rdns_suffixes: None,
        signature_agent: None,
        source: Some(format!("catalogue feed {url} (ai.robots.txt robots.json, MIT): {}", text("function").chars().take(120).collect::<String>())),
    })
}

fn crawler_list_agent(url: &str, a: &serde_json::Value) -> Result<AgentSpec, String> {
    let name = a.get("name").and_then(|x| x.as_str()).ok_or("an agent without a name")?;
    if !crate::catalogue::valid_name(name) {
        return Err(format!("\"{}\": not a name of letters, digits, '.', '_' and '-'", shown(name)));
    }
    let purpose_text = a.get("purpose").and_then(|x| x.as_str()).unwrap_or("");
    let purpose = match purpose_text {
        "training" => Purpose::AiTraining,
        "search" => Purpose::Search,
        "user" => Purpose::AiUser,
        other => Purpose::parse(other).filter(|p| *p != Purpose::UnknownBot).ok_or_else(|| format!("{name}: unknown purpose \"{}\"", shown(other)))?,
    };
    let ua = match a.get("ua") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(js)) => Some(translate(js).map_err(|e| format!("{name}: {e}"))?),
        Some(_) => return Err(format!("{name}: \"ua\" is neither a string nor null")),
    };
    let mut ranges = Vec::new();
    for r in a.get("ranges").and_then(|x| x.as_array()).into_iter().flatten() {
        let r = r.as_str().ok_or_else(|| format!("{name}: a range that is not a string"))?;
        let net = crate::net::parse_net(r).map_err(|e| format!("{name}: {e}"))?;
        ranges.push(net);
    }
    if !ranges.is_empty() {
        crate::ranges::validate(&ranges).map_err(|e| format!("{name}: {e}"))?;
    }
    let operator = a.get("operator").and_then(|x| x.as_str()).unwrap_or("unknown");
    Ok(AgentSpec {
        name: name.to_string(),
        operator: Some(operator.chars().filter(|c| !c.is_control()).take(120).collect()),
        purpose: Some(purpose.as_str().to_string()),
        robots_only: ua.is_none().then_some(true),
        ua,
        robots_token: None,
        ranges_url: None,
        ranges: (!ranges.is_empty()).then(|| ranges.iter().map(|n| n.to_string()).collect()),
        ranges_as_of: None,
        rdns_suffixes: None,
        signature_agent: None,
        source: Some(format!("catalogue feed {url} (a crawler list)")),
    })
}

/// A feed's JavaScript regular expression as a pattern of product names:
/// `\/` is `/`, a name's trailing version slash is dropped (`Googlebot\/`),
/// and what is left must be names (`crate::matcher::names`).
pub fn translate(js: &str) -> Result<String, String> {
    let mut p = js.replace("\\/", "/");
    let alternatives: Vec<String> = split_top(&p).into_iter().map(|a| a.trim_end_matches('/').to_string()).collect();
    p = alternatives.join("|");
    crate::catalogue::check_pattern(&p).map_err(|e| format!("the expression \"{}\" is not a set of product names crawlward can match ({e})", shown(js)))?;
    Ok(p)
}

/// `p` split at the `|` outside groups and classes.
fn split_top(p: &str) -> Vec<&str> {
    let (mut depth, mut class, mut escaped, mut start) = (0i32, false, false, 0);
    let mut out = Vec::new();
    for (i, c) in p.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class => depth += 1,
            ')' if !class => depth -= 1,
            '|' if !class && depth == 0 => {
                out.push(&p[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&p[start..]);
    out
}

/// A name as a pattern that matches it literally.
fn escape_literal(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_string() } else { format!("\\{c}") }).collect()
}

/// `[Name](https://...)` as `Name`; other text as it is, printable.
fn markdown_text(s: &str) -> String {
    let s = s.trim();
    let s = match (s.strip_prefix('['), s.find("](")) {
        (Some(_), Some(end)) => &s[1..end],
        _ => s,
    };
    s.chars().filter(|c| !c.is_control()).take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ai_robots_txt_entries_become_agents_with_a_purpose_from_their_function() {
        let body = br#"{
            "GPTBot": {"operator": "[OpenAI](https://openai.com)", "function": "Scrapes data to train OpenAI's products.", "description": "x"},
            "OAI-SearchBot": {"operator": "OpenAI", "function": "Search result generation.", "description": "x"},
            "Claude-User": {"operator": "Anthropic", "function": "AI Assistants", "description": "x"},
            "Bad Name": {"operator": "x", "function": "y"},
            "NewBot.v2": {"operator": "Unclear at this time.", "function": "Unclear at this time."}
        }"#;
        let f = parse("https://x.example/robots.json", body, Purpose::AiTraining).unwrap();
        assert_eq!(f.format, "ai.robots.txt");
        let by = |n: &str| f.agents.iter().find(|a| a.name == n).unwrap();
        assert_eq!(by("GPTBot").purpose.as_deref(), Some("ai-training"));
        assert_eq!(by("GPTBot").operator.as_deref(), Some("OpenAI"));
        assert_eq!(by("OAI-SearchBot").purpose.as_deref(), Some("ai-search"));
        assert_eq!(by("Claude-User").purpose.as_deref(), Some("ai-user"));
        assert_eq!(by("NewBot.v2").ua.as_deref(), Some("NewBot\\.v2"));
        assert_eq!(by("NewBot.v2").operator.as_deref(), Some("unknown"));
        assert_eq!(f.refused, vec!["\"Bad Name\": not a name of letters, digits, '.', '_' and '-'".to_string()]);
    }

    #[test]
    fn crawler_list_regexes_become_names_or_are_refused() {
        let body = br#"{"version": "5f0c", "ttl": 86400, "policy": {"training": "block"},
            "agents": [
                {"name": "GPTBot", "operator": "openai.com", "purpose": "training", "ua": "GPTBot", "ranges": ["20.15.240.64/28"]},
                {"name": "Google-Extended", "operator": "google.com", "purpose": "training", "ua": null, "ranges": []},
                {"name": "Slashbot", "operator": "x", "purpose": "search", "ua": "Slashbot\\/", "ranges": []},
                {"name": "Wild", "operator": "x", "purpose": "search", "ua": "Wild.*bot", "ranges": []},
                {"name": "Everyone", "operator": "x", "purpose": "search", "ua": "Everyone", "ranges": ["0.0.0.0/0"]},
                {"name": "Odd", "operator": "x", "purpose": "espionage", "ua": "Odd"}
            ], "robots": "User-agent: GPTBot\nDisallow: /\n"}"#;
        let f = parse("https://x.example/v1/crawlers", body, Purpose::AiTraining).unwrap();
        assert_eq!((f.format.as_str(), f.version.as_deref()), ("crawler-list", Some("5f0c")));
        let names: Vec<&str> = f.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["GPTBot", "Google-Extended", "Slashbot"]);
        assert_eq!(f.agents[0].ranges.as_deref(), Some(&["20.15.240.64/28".to_string()][..]));
        assert_eq!(f.agents[1].robots_only, Some(true));
        assert_eq!(f.agents[2].ua.as_deref(), Some("Slashbot"), "the version's slash is dropped");
        assert_eq!(f.agents[2].purpose.as_deref(), Some("search"));
        assert_eq!(f.refused.len(), 3, "{:?}", f.refused);
        assert!(f.refused[0].starts_with("Wild: the expression \"Wild.*bot\" is not a set of product names crawlward can match"), "{:?}", f.refused);
        assert!(f.refused[1].starts_with("Everyone: "), "{:?}", f.refused);
        assert_eq!(f.refused[2], "Odd: unknown purpose \"espionage\"");
    }

    #[test]
    fn a_body_of_neither_format_is_refused_whole() {
        assert!(parse("u", b"<html>", Purpose::AiTraining).unwrap_err().starts_with("the feed is not JSON"));
        assert!(parse("u", b"[1, 2]", Purpose::AiTraining).unwrap_err().contains("not a JSON object"));
        assert!(parse("u", b"{\"a\": 1}", Purpose::AiTraining).unwrap_err().contains("neither"));
        assert!(parse("u", b"{\"agents\": 3}", Purpose::AiTraining).unwrap_err().contains("not a list"));
    }
}
