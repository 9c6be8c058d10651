//! `crawlward analyze`: who is crawling the site, what each rule cost, and
//! the proportional classifier, from the access log (or from an
//! aggregates file of clients). The decisions (catalogue, verdicts, robots.txt
//! rules, the classifier's arithmetic) are the policy crate's; this module
//! reads the input and prints.

mod accounts;
mod aggregates;
mod html;
mod parse;
mod read;
mod report;
mod sketch;
mod stats;
mod suggest;
mod text;

pub use read::looks_like_log;

use crate::exit::{self, io_error};
use crawlward_policy::classifier::Label;
use crawlward_policy::Policy;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
    Html,
}

pub struct Options {
    pub logs: Vec<String>,
    pub aggregates: Option<String>,
    pub labels: Option<String>,
    pub format: Output,
    pub out: Option<String>,
    pub suggest: Option<String>,
    pub interval_seconds: i64,
    pub window_minutes: Option<f64>,
    pub top: usize,
}

pub fn run(policy: &Policy, opts: &Options) -> i32 {
    let mut policy = policy.clone();
    if let Some(w) = opts.window_minutes {
        policy.classifier.window_minutes = w;
    }
    let labels = match &opts.labels {
        None => HashMap::new(),
        Some(path) => match read_labels(path) {
            Ok(l) => l,
            Err(e) => {
                tell!("error: {e}");
                return exit::POLICY;
            }
        },
    };
    let mut input_failed = false;
    let (mut rep, cands) = if let Some(path) = &opts.aggregates {
        let mut settings = policy.classifier.clone();
        let cands = match aggregates::read(path, &mut settings) {
            // an aggregate's agent, as the labels file names it: its catalogue purpose
            Ok(mut c) => {
                for cand in &mut c {
                    cand.purpose = policy.identity.catalogue.get(&cand.agent).map(|a| a.purpose);
                }
                c
            }
            Err(e) => {
                tell!("error: {e}");
                return exit::POLICY;
            }
        };
        policy.classifier = settings;
        let mut r = report::log_report(
            &stats::Analyzer::new(&policy, opts.interval_seconds),
            &policy.source_name,
            vec![report::InputReport { name: path.clone(), lines: 0, error: None }],
            opts.top,
        );
        r.source = "aggregates";
        let sessions = cands.iter().any(|c| c.scored.features.reuse.is_some());
        r.classifier = report::classifier_report(&cands, &labels, &policy.classifier, opts.top.max(cands.len()), sessions);
        (r, cands)
    } else {
        let mut a = stats::Analyzer::new(&policy, opts.interval_seconds);
        let names: Vec<String> = if opts.logs.is_empty() { vec!["-".into()] } else { opts.logs.clone() };
        let mut inputs = Vec::new();
        for name in &names {
            let shown = if name == "-" { "standard input".to_string() } else { name.clone() };
            let before = a.lines;
            let error = match read::open(name) {
                Err(e) => Some(e.to_string()),
                Ok(mut r) => {
                    a.place = (shown.clone(), 0);
                    read::lines(&mut r, |piece| {
                        a.place.1 += 1;
                        match piece {
                            read::Piece::Line(l) => a.line(l),
                            read::Piece::TooLong(l) => {
                                a.lines += 1;
                                a.unparseable_line("line longer than 64 KiB", l);
                            }
                        }
                    })
                    .err()
                    .map(|e| e.to_string())
                }
            };
            if let Some(e) = &error {
                tell!("error: cannot read {shown}\n  caused by: {e}");
                input_failed = true;
            }
            inputs.push(report::InputReport { name: shown, lines: a.lines - before, error });
        }
        a.finish();
        if a.lines == 0 && input_failed {
            // no log could be read: no report, whose checks would pass on nothing
            return exit::IO;
        }
        if a.lines > 0 && a.parsed == 0 {
            let read: Vec<&str> = inputs.iter().filter(|i| i.error.is_none()).map(|i| i.name.as_str()).collect();
            tell!(
                "error: none of the {} lines of {} is an access log line that analyze reads (nginx's combined format, or crawlward_combined): nothing to analyze",
                a.lines,
                read.join(", ")
            );
            return exit::POLICY;
        }
        let mut r = report::log_report(&a, &policy.source_name, inputs, opts.top);
        let cands = report::log_candidates(&mut a);
        r.classifier = report::classifier_report(&cands, &labels, &policy.classifier, opts.top, false);
        (r, cands)
    };
    rep.suggestion = suggest::fragment(&rep, &cands, &policy);

    if let Some(path) = &opts.suggest {
        if let Err(e) = write_atomically(path, rep.suggestion.as_bytes()) {
            return io_error(&format!("cannot write {path}"), e);
        }
    }
    let body = match opts.format {
        Output::Text => text::render(&rep, opts.top),
        Output::Json => {
            let mut s = serde_json::to_string_pretty(&rep).unwrap_or_default();
            s.push('\n');
            s
        }
        Output::Html => html::render(&rep),
    };
    match &opts.out {
        Some(path) => {
            if let Err(e) = write_atomically(path, body.as_bytes()) {
                return io_error(&format!("cannot write {path}"), e);
            }
        }
        None => {
            let _ = std::io::stdout().write_all(body.as_bytes());
        }
    }
    if input_failed {
        exit::IO
    } else if rep.source == "log" && !rep.checks.ok {
        exit::CHECK_FAILED
    } else {
        exit::OK
    }
}

/// A labels file: `client label` per line (`abusive` or `legitimate`), `#` comments.
fn read_labels(path: &str) -> Result<HashMap<String, Label>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(word), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("{path}:{}: expected a client and a label (abusive or legitimate), e.g. 198.51.100.7 abusive", i + 1));
        };
        let label = Label::parse(word).ok_or_else(|| format!("{path}:{}: unknown label \"{word}\": expected abusive or legitimate", i + 1))?;
        if out.insert(name.to_string(), label).is_some() {
            return Err(format!("{path}:{}: client \"{name}\" is labeled twice", i + 1));
        }
    }
    Ok(out)
}

fn write_atomically(path: &str, data: &[u8]) -> std::io::Result<()> {
    let p = Path::new(path);
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(data)?;
    // a report is for people to read (and perhaps to serve): 0644, not tempfile's 0600
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    tmp.persist(p).map_err(|e| e.error)?;
    Ok(())
}
