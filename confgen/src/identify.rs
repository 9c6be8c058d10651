//! `crawlward identify`: who each User-Agent names, one a line, as the
//! module and `explain` decide it (`Catalogue::identify`): the agent, its
//! purpose and operator, and how it was found.

use crawlward_policy::detector;
use crawlward_policy::Policy;
use std::io::{BufRead, Write};

/// Reads User-Agents from `inputs` (`-` or none: standard input), writes
/// one tab-separated line each: name (an unknown bot's own product token),
/// purpose, operator, verification (`ranges`, `dns` or `none`), how
/// ("product" or the detector's signal; "-" for a person), and the
/// User-Agent, escaped as nginx escapes its access log. Returns the exit code.
pub fn run(policy: &Policy, inputs: &[String]) -> i32 {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let names: Vec<String> = if inputs.is_empty() { vec!["-".into()] } else { inputs.to_vec() };
    for name in &names {
        if name != "-" && crate::analyze::looks_like_log(std::path::Path::new(name)) {
            tell!("error: {name} is an access log, and identify reads User-Agents, one a line: for the clients of a log, run crawlward analyze {name}");
            return crate::exit::POLICY;
        }
        let reader: Box<dyn BufRead> = if name == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            match std::fs::File::open(name) {
                Ok(f) => Box::new(std::io::BufReader::new(f)),
                Err(e) => {
                    let code = crate::exit::io_error(&format!("cannot read {name}"), &e);
                    if e.kind() == std::io::ErrorKind::NotFound && name.contains(' ') {
                        tell!(
                            "hint: identify reads User-Agents from files, one a line; for one User-Agent:  echo '{}' | crawlward identify",
                            name.replace('\'', "'\\''")
                        );
                    }
                    return code;
                }
            }
        };
        for line in reader.split(b'\n') {
            let mut ua = match line {
                Ok(l) => l,
                Err(e) => return crate::exit::io_error(&format!("cannot read {name}"), e),
            };
            if ua.last() == Some(&b'\r') {
                ua.pop();
            }
            if writeln!(out, "{}", line_for(policy, &ua)).is_err() {
                // a closed pipe (`| head`): done
                return crate::exit::OK;
            }
        }
    }
    let _ = out.flush();
    crate::exit::OK
}

/// One output line for one User-Agent.
pub fn line_for(policy: &Policy, ua: &[u8]) -> String {
    let catalogue = &policy.identity.catalogue;
    let shown = crawlward_policy::escape::escaped(ua);
    let found = catalogue.identify(ua).unwrap_or_default();
    let Some(agent) = found.agent.map(|i| &catalogue.agents()[i]) else {
        return format!("-\t-\t-\t-\t-\t{shown}");
    };
    let verification = if !agent.ranges.is_empty() {
        "ranges"
    } else if !agent.rdns_suffixes.is_empty() {
        "dns"
    } else {
        "none"
    };
    if agent.counts_by_token() {
        let name = catalogue.label(ua, &found).unwrap_or_default();
        let how = detector::bot(crawlward_policy::catalogue::read_part(ua)).map_or("a bot", |b| b.signal.as_str());
        return format!("{name}\t{}\t{}\t{verification}\t{how}\t{shown}", agent.purpose, agent.operator);
    }
    format!("{}\t{}\t{}\t{verification}\tproduct\t{shown}", agent.name, agent.purpose, agent.operator)
}
