//! The Prometheus text format's one rule that writing zone by zone breaks:
//! a metric family's samples follow its `# HELP` and `# TYPE` lines once,
//! together. The status endpoint writes each zone's lines in turn (two
//! quota zones, two budget zones), so [`grouped`] puts each family's
//! samples together, under its first `# HELP` and `# TYPE`, in the order
//! the families first appear.

/// `text` (Prometheus text format, a sample or a `#` line a line) with each
/// family's lines together. The families here have no suffixed samples
/// (no histograms or summaries): a sample's family is its metric name.
pub fn grouped(text: &str) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut families: std::collections::HashMap<&str, (Vec<&str>, Vec<&str>)> = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (name, is_meta) = match line.strip_prefix("# ") {
            Some(rest) => match rest.split_once(' ') {
                Some((kind, after)) if kind == "HELP" || kind == "TYPE" => (after.split(' ').next().unwrap_or(""), true),
                _ => continue,
            },
            None => (line.split(['{', ' ']).next().unwrap_or(""), false),
        };
        let family = families.entry(name).or_insert_with(|| {
            order.push(name);
            (Vec::new(), Vec::new())
        });
        if is_meta {
            // one HELP and one TYPE a family
            let kind = &line[..6];
            if !family.0.iter().any(|l| l.starts_with(kind)) {
                family.0.push(line);
            }
        } else {
            family.1.push(line);
        }
    }
    let mut out = String::with_capacity(text.len());
    for name in order {
        let (meta, samples) = &families[name];
        for line in meta.iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_zones_samples_come_under_one_help_and_type() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{zone=\"q1\"} 1\n# HELP b B.\n# TYPE b gauge\nb{zone=\"q1\"} 2\n\
                    # HELP a_total A.\n# TYPE a_total counter\na_total{zone=\"q2\"} 3\n# HELP b B.\n# TYPE b gauge\nb{zone=\"q2\"} 4\nc 5\n";
        assert_eq!(
            grouped(text),
            "# HELP a_total A.\n# TYPE a_total counter\na_total{zone=\"q1\"} 1\na_total{zone=\"q2\"} 3\n\
             # HELP b B.\n# TYPE b gauge\nb{zone=\"q1\"} 2\nb{zone=\"q2\"} 4\nc 5\n"
        );
        // already grouped: unchanged
        assert_eq!(grouped(&grouped(text)), grouped(text));
    }

    #[test]
    fn label_values_with_spaces_and_braces_stay_whole() {
        let text = "# HELP q Q.\n# TYPE q gauge\nq{account=\"a b} {x\"} 1\n";
        assert_eq!(grouped(text), text);
    }
}
