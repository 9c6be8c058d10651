//! Where a User-Agent claims to be an agent: its product tokens, not its mentions.
//!
//! A User-Agent is a list of products (`Name/version`) and comments
//! (`(item; item; ...)`). An agent's pattern names the agent only where it
//! stands as a product or a comment item:
//!
//! - at the start of the User-Agent (`Googlebot/2.1 (+http://...)`);
//! - right after `(`, `;` or `,` (`(compatible; Googlebot/2.1; ...)`), with
//!   spaces between allowed;
//! - right after a space or tab, unless the word before it is `like` or
//!   `with` (`... Safari/537.36 Qwantify/2.4w` is a claim, `... like Googlebot`
//!   and `compatible with Googlebot` are mentions);
//!
//! and the match ends where the word does: the byte after it is not a
//! letter (`Googlebot-Image/1.0` and `trendictionbot0.5.0` claim their
//! names, `GooglebotX` does not). So `Fake-Googlebot/1.0` (the name inside a longer token),
//! `Feedly/1.0 (...; like FeedFetcher-Google)` (a comment item that starts
//! with "like") and `FreshRSS/1.24 (...) like Googlebot` claim nothing of
//! Google's: a feed reader that mentions Googlebot is not a spoofed Googlebot.
//!
//! The module and `crawlward explain` decide with [`claim_at`] and
//! [`ends_token`]; the stock render writes the same rule into each pattern
//! of its `map` ([`pcre`]), and a test runs both on the same strings.

/// Whether a claim may start at `s` in `ua`.
#[inline]
pub fn claim_at(ua: &[u8], s: usize) -> bool {
    if s == 0 {
        return true;
    }
    match ua.get(s - 1) {
        Some(b'(' | b';' | b',') => true,
        Some(b' ' | b'\t') => !(s >= 5 && mention(&ua[..s - 1])),
        _ => false,
    }
}

/// Whether `before` (the bytes before the space) ends with the word `like`
/// or `with`: a mention, not a claim.
fn mention(before: &[u8]) -> bool {
    let n = before.len();
    let word = &before[n - 4..];
    (word.eq_ignore_ascii_case(b"like") || word.eq_ignore_ascii_case(b"with")) && (n == 4 || !is_word(before[n - 5]))
}

/// Whether a match that ends at `e` (exclusive) ends the word: the byte at
/// `e` is not a letter (a version may follow at once: `NLNZ_IAHarvester2024`).
#[inline]
pub fn ends_token(ua: &[u8], e: usize) -> bool {
    ua.get(e).is_none_or(|b| !b.is_ascii_alphabetic())
}

/// A byte of a regular expression's `\w` (ASCII, as nginx's PCRE has it).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The claim rule for nginx's PCRE (`~*`), before a name: where a claim may
/// start ([`claim_at`]).
pub const PCRE_BEFORE: &str = "(?<![^ \\t(;,])(?<!\\blike[ \\t])(?<!\\bwith[ \\t])";
/// After a name: where it ends ([`ends_token`]).
pub const PCRE_AFTER: &str = "(?![a-z])";

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(ua: &str, token: &str) -> bool {
        let (u, t) = (ua.as_bytes(), token.as_bytes());
        (0..=u.len().saturating_sub(t.len()))
            .any(|s| u[s..].len() >= t.len() && u[s..s + t.len()].eq_ignore_ascii_case(t) && claim_at(u, s) && ends_token(u, s + t.len()))
    }

    #[test]
    fn a_product_or_a_comment_item_claims_a_mention_does_not() {
        for (ua, token) in [
            ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot"),
            ("Googlebot/2.1 (+http://www.google.com/bot.html)", "Googlebot"),
            ("Googlebot-Image/1.0", "Googlebot"),
            ("FeedFetcher-Google; (+http://www.google.com/feedfetcher.html)", "FeedFetcher-Google"),
            ("Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.1 (KHTML, like Gecko) Chrome/21.0 Safari/537.1; 360Spider", "360Spider"),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/49.0 Safari/537.36 Google Favicon", "Google Favicon"),
            ("Mozilla/5.0 (compatible;acapbot/0.1;treat like Googlebot)", "acapbot"),
            ("Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)", "Yahoo! Slurp"),
            ("Mozilla/5.0 (en-us) AppleWebKit/525.13 (KHTML, like Gecko; Google Web Preview) Version/3.1 Safari/525.13", "Google Web Preview"),
            ("TelegramBot (like TwitterBot)", "TelegramBot"),
            ("Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)", "Feedly"),
        ] {
            assert!(claims(ua, token), "{ua} should claim {token}");
        }
        for (ua, token) in [
            ("Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)", "FeedFetcher-Google"),
            ("Mozilla/5.0 (compatible; Feedspot/1.0 (+https://www.feedspot.com/fs/fetcher; like FeedFetcher-Google)", "FeedFetcher-Google"),
            ("Mozilla/5.0 (compatible; inoreader.com-like FeedFetcher-Google)", "FeedFetcher-Google"),
            ("FreshRSS/1.24.0 (Linux; https://freshrss.org) like Googlebot", "Googlebot"),
            ("Gwene/1.0 (The gwene.org rss-to-news gateway) Googlebot", "Googlebot"),
            ("SentiBot www.sentibot.eu (compatible with Googlebot)", "Googlebot"),
            ("Mozilla/5.0 (compatible;acapbot/0.1;treat like Googlebot)", "Googlebot"),
            ("Mozilla/5.0 (compatible; Fake-Googlebot/2.1)", "Googlebot"),
            ("Mozilla/5.0 (compatible; GooglebotX/2.1)", "Googlebot"),
            ("TelegramBot (like TwitterBot)", "TwitterBot"),
            ("Mozilla/5.0 (compatible; like Googlebot/2.1)", "Googlebot"),
        ] {
            let expect = ua.starts_with("Gwene");
            assert_eq!(claims(ua, token), expect, "{ua}: {token}");
        }
    }

    #[test]
    fn like_and_with_are_words_not_endings() {
        // "unlike" and "forthwith" end in like/with but are other words
        assert!(claims("x unlike Googlebot/1", "Googlebot"));
        assert!(claims("x forthwith Googlebot/1", "Googlebot"));
        assert!(!claims("x-like Googlebot/1", "Googlebot"));
        assert!(!claims("LIKE Googlebot/1", "Googlebot"));
        assert!(!claims("x\twith\tGooglebot", "Googlebot"));
    }
}
