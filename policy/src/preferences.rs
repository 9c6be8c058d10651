//! The site's preferences for the use of its content, said in the words of
//! the standards crawlers read: `Content-Usage` (the IETF AI preferences
//! vocabulary, draft-ietf-aipref-vocab, attached to robots.txt and to
//! responses by draft-ietf-aipref-attach), Cloudflare's `Content-Signal`,
//! and RSL's `License`. They are derived from the policy's actions, so that
//! what robots.txt says and what nginx does cannot disagree.

use crate::{Action, Purpose};

/// One label's value: `y` or `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pref {
    Yes,
    No,
}

impl Pref {
    pub fn parse(v: &str) -> Option<Pref> {
        match v {
            "y" => Some(Pref::Yes),
            "n" => Some(Pref::No),
            _ => None,
        }
    }

    fn letter(self) -> &'static str {
        match self {
            Pref::Yes => "y",
            Pref::No => "n",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Pref::Yes => "yes",
            Pref::No => "no",
        }
    }
}

/// The vocabulary's two labels; `None`: no preference said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub search: Option<Pref>,
    pub train_ai: Option<Pref>,
}

impl Usage {
    /// What the actions say: `train-ai=n` when the policy blocks AI-training
    /// crawlers, `search=y` when it lets search crawlers in and `search=n`
    /// when it blocks them. Nothing is said for a throttle: it refuses no one.
    pub fn of_actions(action_of: impl Fn(Purpose) -> Action) -> Usage {
        let said = |p: Purpose, allowed: Option<Pref>| match action_of(p) {
            Action::Block(_) => Some(Pref::No),
            Action::Allow => allowed,
            _ => None,
        };
        Usage { search: said(Purpose::Search, Some(Pref::Yes)), train_ai: said(Purpose::AiTraining, None) }
    }

    /// `self`, with each label `over` says replaced.
    pub fn with(self, over: Usage) -> Usage {
        Usage { search: over.search.or(self.search), train_ai: over.train_ai.or(self.train_ai) }
    }

    /// An RFC 9651 dictionary, as the vocabulary writes it (`search=y,
    /// train-ai=n`); `None` when nothing is said.
    pub fn dictionary(&self) -> Option<String> {
        let members: Vec<String> =
            [("search", self.search), ("train-ai", self.train_ai)].iter().filter_map(|(label, v)| v.map(|v| format!("{label}={}", v.letter()))).collect();
        (!members.is_empty()).then(|| members.join(", "))
    }
}

/// `preferences`, checked, with what the actions say filled in.
#[derive(Debug, Clone, Default)]
pub struct Preferences {
    /// Whether robots.txt carries `Content-Usage` lines (default yes).
    pub content_usage: bool,
    /// The whole site's preferences.
    pub site: Usage,
    /// Path prefixes with their own preferences (the site's, overridden),
    /// longest first.
    pub paths: Vec<(String, Usage)>,
    /// The `Content-Signal:` line, when the policy asks for it.
    pub content_signal: Option<String>,
    /// The `License:` line's URL.
    pub license: Option<String>,
    /// Whether responses carry a `Content-Usage` header.
    pub header: bool,
}

/// Cloudflare's `Content-Signal` (`search=yes, ai-input=no, ai-train=no`):
/// `search` and `ai-train` as the site's preferences say, `ai-input` (content
/// put into an AI's answer: AI search, agents acting for a person) from the
/// actions of those purposes; a label without a preference is left out.
pub fn content_signal(site: Usage, action_of: impl Fn(Purpose) -> Action) -> Option<String> {
    let input = [Purpose::AiSearch, Purpose::AiUser].map(action_of);
    let ai_input = if input.iter().any(|a| matches!(a, Action::Block(_))) {
        Some(Pref::No)
    } else if input.iter().all(|a| *a == Action::Allow) {
        Some(Pref::Yes)
    } else {
        None
    };
    let members: Vec<String> = [("search", site.search), ("ai-input", ai_input), ("ai-train", site.train_ai)]
        .iter()
        .filter_map(|(label, v)| v.map(|v| format!("{label}={}", v.word())))
        .collect();
    (!members.is_empty()).then(|| members.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(training: Action, search: Action, ai_search: Action) -> impl Fn(Purpose) -> Action {
        move |p| match p {
            Purpose::AiTraining => training,
            Purpose::Search => search,
            Purpose::AiSearch | Purpose::AiUser => ai_search,
            _ => Action::Allow,
        }
    }

    #[test]
    fn the_actions_say_the_preferences() {
        let u = Usage::of_actions(actions(Action::Block(444), Action::Allow, Action::Allow));
        assert_eq!(u.dictionary().as_deref(), Some("search=y, train-ai=n"));
        // allowing AI training grants nothing on the site's behalf
        let u = Usage::of_actions(actions(Action::Allow, Action::Allow, Action::Allow));
        assert_eq!(u.dictionary().as_deref(), Some("search=y"));
        let u = Usage::of_actions(actions(Action::Throttle, Action::Throttle, Action::Allow));
        assert_eq!(u.dictionary(), None, "a throttle refuses no one, and says nothing");
        let u = Usage::of_actions(actions(Action::Block(403), Action::Block(403), Action::Allow));
        assert_eq!(u.dictionary().as_deref(), Some("search=n, train-ai=n"));
    }

    #[test]
    fn overrides_replace_only_what_they_say() {
        let site = Usage { search: Some(Pref::Yes), train_ai: Some(Pref::No) };
        let open = site.with(Usage { search: None, train_ai: Some(Pref::Yes) });
        assert_eq!(open.dictionary().as_deref(), Some("search=y, train-ai=y"));
    }

    #[test]
    fn content_signal_adds_the_retrieval_axis() {
        let a = actions(Action::Block(444), Action::Allow, Action::Allow);
        let site = Usage::of_actions(&a);
        assert_eq!(content_signal(site, &a).as_deref(), Some("search=yes, ai-input=yes, ai-train=no"));
        let a = actions(Action::Block(444), Action::Allow, Action::Block(403));
        assert_eq!(content_signal(Usage::of_actions(&a), &a).as_deref(), Some("search=yes, ai-input=no, ai-train=no"));
    }
}
