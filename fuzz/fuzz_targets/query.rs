//! The query-string and facet parser: any query string, any Referer, any
//! verdict. The scan counts what the application will see, in one pass,
//! within its bounds; the guard's decision follows from the scan.
#![no_main]

use crawlward_policy::query::{facet_name_owned, form_decode, php_name, scan_query, FacetGuard, FacetNames, MAX_DISTINCT};
use crawlward_policy::{Rule, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    // the Referer is what follows the first newline, when there is one
    let (query, referer) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let guard = FacetGuard {
        facets: FacetNames {
            names: vec!["subjects".into(), "places".into(), "names".into(), facet_name_owned("place name")],
            prefixes: vec!["filter_".into()],
        },
        crawler_max_params: 4,
        max_facets_without_referer: 2,
        same_site_hosts: vec!["heratio.org".into(), "www.heratio.org".into()],
        exempt_verified: selector & 1 == 0,
        retry_after: 60,
        paths: vec!["/glam/browse".into()],
    };
    let verdict = Verdict::ALL[(selector as usize >> 1) % Verdict::ALL.len()];
    let outcome = guard.decide(verdict, query, referer);
    let scan = outcome.scan;

    // every counted parameter is a non-empty run between '&'s
    let nonempty = query.split(|b| *b == b'&').filter(|p| !p.is_empty()).count();
    assert_eq!(scan.params as usize, nonempty, "parameters of {query:?}");
    assert!(scan.facets as usize <= MAX_DISTINCT && scan.facets <= scan.params);
    assert_eq!(scan, scan_query(query, &guard.facets), "the scan depends on the query alone");
    match outcome.rule {
        None => assert!(
            (verdict == Verdict::Verified && guard.exempt_verified)
                || (!(verdict.is_crawler() && scan.params >= guard.crawler_max_params)
                    && (scan.facets < guard.max_facets_without_referer
                        || referer.is_some_and(|r| crawlward_policy::query::same_site(r, &guard.same_site_hosts))))
        ),
        Some(Rule::FacetCrawlerParams) => assert!(verdict.is_crawler() && scan.params >= guard.crawler_max_params),
        Some(Rule::FacetNoReferer) => assert!(scan.facets >= guard.max_facets_without_referer),
        Some(other) => panic!("the facet guard decided {other:?}"),
    }

    // decoding keeps to its bound and never grows the text
    let mut out = Vec::new();
    for max in [0, 1, 7, 128, 4096] {
        form_decode(query, &mut out, max);
        assert!(out.len() <= max.min(query.len()));
    }
    let mut name = [0u8; 64];
    let n = php_name(query, &mut name);
    assert!(n <= name.len() && !name[..n].contains(&0) && !name[..n].contains(&b'.') && !name[..n].contains(&b' '));
});
