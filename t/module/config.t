# ngx_http_crawlward_module's directives under `nginx -t`: bad arguments, a missing or broken catalogue and missing companions are rejected with an [emerg] line that names the directive and says what is wrong; good ones pass.

use warnings;
use strict;

use Test::More;

use JSON::PP;
use POSIX qw/ _exit /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;


my $T_WAIT = 20;	# seconds one nginx -t may take

my $t = Test::Nginx->new()->has(qw/http limit_req/);

my $dir = render($t, 't/policies/module.yaml');
my $d = $t->testdir();
my $cat = "$dir/crawlward-catalogue.json";

# broken catalogues, made from the rendered one

my $json = JSON::PP->new->canonical->pretty;
my $good = $json->decode($t->read_file(substr($cat, length("$d/"))));

my $bad = $json->decode($json->encode($good));
my ($gpt) = grep { $bad->{agents}[$_]{name} eq 'GPTBot' } 0 .. $#{ $bad->{agents} };
$bad->{agents}[$gpt]{ua} = 'Bad(bot';
$t->write_file('bad-ua.json', $json->encode($bad));

my $future = $json->decode($json->encode($good));
$future->{format} = 99;
$t->write_file('format-99.json', $json->encode($future));

$t->write_file('not-json.json', "User-agent: *\nDisallow: /admin\n");
$t->write_file('ranges.json', '{"creationTime": "2026-11-29", "prefixes": []}');

# a policy with the ladder, its cookie's key file not made yet, and one whose key is too short
$t->write_file('ladder.yaml', <<"EOF");
site: {canonical_url: https://example.org, upstream_workers: 8}
install:
  dir: /etc/nginx/crawlward-ladder
  throttle_log: /var/log/nginx/ladder-throttled.log
robots: {}
module: {}
classifier:
  mode: observe
  cookie: {key_file: $d/missing.key}
EOF
my $ladder_cat = render($t, "$d/ladder.yaml") . '/crawlward-catalogue.json';
my $short = $json->decode($t->read_file(substr($ladder_cat, length("$d/"))));
$short->{ladder}{classifier}{cookie}{key_file} = "$d/short.key";
$t->write_file('ladder-short-key.json', $json->encode($short));
$t->write_file('short.key', "too-short\n");
$t->write_file('keys.json', '{"keys":[{"account":"acme","tier":"gold","sha256":"'
	. ('ab' x 32) . '"}]}');
$t->write_file('broken-keys.json', '{"keys":[{"account":"a","sha256":"xyz"}]}');
$t->write_file('two-tier-keys.json', '{"keys":[{"account":"acme","tier":"gold","sha256":"'
	. ('ab' x 32) . '"},{"account":"acme","sha256":"' . ('cd' x 32) . '"}]}');
my $LADDER = 'crawlward_ladder zone=crawlward_ladder:32k;';

my $CATALOGUE = "crawlward_catalogue $cat;";
my $ZONE = 'crawlward_zone zone=crawlward:1m;';
my $DNS = 'crawlward_dns_cache zone=dns:1m;';
my $RESOLVER = 'resolver 127.0.0.1:%%PORT_8053_UDP%%;';

# name => [ http-level lines, server-level lines, what nginx -t must say,
#           the directive the [emerg] line must name ]
# (an [emerg] from merge or postconfiguration points at the end of http {})

my @bad = (
	[ 'crawlward maybe', "$CATALOGUE", 'crawlward maybe;',
		qr/invalid value "maybe" in "crawlward" directive, it must be "on" or "off"/,
		'crawlward' ],
	[ 'crawlward_dry_run maybe', "$CATALOGUE", 'crawlward on; crawlward_dry_run maybe;',
		qr/invalid value "maybe" in "crawlward_dry_run" directive/,
		'crawlward_dry_run' ],
	[ 'crawlward without an argument', "$CATALOGUE", 'crawlward;',
		qr/invalid number of arguments in "crawlward" directive/,
		'crawlward' ],
	[ 'crawlward_zone foo', "$CATALOGUE crawlward_zone foo;", '',
		qr/"foo".*zone=name:size/,
		'crawlward_zone' ],
	[ 'crawlward_zone zone=x', "$CATALOGUE crawlward_zone zone=x;", '',
		qr/"zone=x".*zone=name:size/,
		'crawlward_zone' ],
	[ 'crawlward_zone zone=:1m', "$CATALOGUE crawlward_zone zone=:1m;", '',
		qr/"zone=:1m".*zone=name:size/,
		'crawlward_zone' ],
	[ 'crawlward_zone with a quote in the name', "$CATALOGUE crawlward_zone 'zone=a\"b:1m';", '',
		qr/invalid zone name "a"b"/,
		'crawlward_zone' ],
	[ 'crawlward_zone zone=x:abc', "$CATALOGUE crawlward_zone zone=x:abc;", '',
		qr/invalid zone size "abc"/,
		'crawlward_zone' ],
	[ 'crawlward_zone zone=x:1k', "$CATALOGUE crawlward_zone zone=x:1k;", '',
		qr/zone "x" is too small.*: at least 32k/,
		'crawlward_zone' ],
	[ 'crawlward_zone twice', "$CATALOGUE $ZONE crawlward_zone zone=other:1m;", '',
		qr/"crawlward_zone" directive is duplicate/,
		'crawlward_zone' ],
	[ 'crawlward_zone on a limit_req zone',
		"$CATALOGUE limit_req_zone \$binary_remote_addr zone=crawlward:1m rate=1r/s; $ZONE", '',
		qr/shared memory zone "crawlward" is already declared for a different use/,
		'crawlward_zone' ],
	[ 'crawlward_catalogue /nonexistent', 'crawlward_catalogue /nonexistent/catalogue.json;', '',
		qr!cannot read "/nonexistent/catalogue\.json": No such file or directory!,
		'crawlward_catalogue' ],
	[ 'crawlward_catalogue with a bad ua pattern', "crawlward_catalogue $d/bad-ua.json;", '',
		qr/agents\[$gpt\]\.ua: invalid ua pattern "Bad\(bot"/,
		'crawlward_catalogue' ],
	[ 'crawlward_catalogue of format 99', "crawlward_catalogue $d/format-99.json;", '',
		qr/catalogue file format 99 is not \d+/,
		'crawlward_catalogue' ],
	[ 'crawlward_catalogue not JSON', "crawlward_catalogue $d/not-json.json;", '',
		qr/invalid catalogue file: not a JSON object \(.*\): crawlward_catalogue takes the crawlward-catalogue\.json that crawlward render writes/,
		'crawlward_catalogue' ],
	[ 'crawlward_catalogue of a ranges file', "crawlward_catalogue $d/ranges.json;", '',
		qr/invalid catalogue file: a JSON object, but no catalogue \(no format, no agents\)/,
		'crawlward_catalogue' ],
	[ 'crawlward_ladder zone=x', "$CATALOGUE crawlward_ladder zone=x;", '',
		qr/"zone=x".*zone=name:size/,
		'crawlward_ladder' ],
	[ 'crawlward_ladder with a catalogue whose policy runs no ladder', "$CATALOGUE $LADDER", '',
		qr/"crawlward_ladder" needs a "crawlward_catalogue" rendered from a policy whose classifier sets a mode/,
		'crawlward_ladder' ],
	[ 'crawlward_ladder without the cookie\'s key file', "crawlward_catalogue $ladder_cat; $LADDER", '',
		qr!"crawlward_ladder" cannot read the cookie's key file "\Q$d\E/missing\.key": No such file or directory.* \(make one, readable by root only: \(umask 077; head -c 32 /dev/urandom \| base64 > !,
		'crawlward_ladder' ],
	[ 'crawlward_ladder with a short cookie key', "crawlward_catalogue $d/ladder-short-key.json; $LADDER", '',
		qr!"crawlward_ladder": the cookie's key file "\Q$d\E/short\.key": line 1: a key of 9 bytes; a key has at least 32!,
		'crawlward_ladder' ],
	[ 'crawlward_signatures without keys=', 'crawlward_signatures skew=60s;', '',
		qr/"crawlward_signatures" directive needs keys=FILE/,
		'crawlward_signatures' ],
	[ 'crawlward_signatures skew=10m', "crawlward_signatures keys=$d/ranges.json skew=10m;", '',
		qr/invalid parameter "skew=10m" in "crawlward_signatures" directive, expected keys=FILE, skew=TIME \(at most 300s\), hosts=NAME,..., replay=name:size and failures=N \(0 to 65535\)/,
		'crawlward_signatures' ],
	[ 'crawlward_signatures failures=-1', "crawlward_signatures keys=$d/ranges.json failures=-1;", '',
		qr/invalid parameter "failures=-1" in "crawlward_signatures" directive/,
		'crawlward_signatures' ],
	[ 'crawlward_signatures replay= twice', "crawlward_signatures keys=$d/ranges.json replay=r1:64k replay=r2:64k;", '',
		qr/invalid parameter "replay=r2:64k" in "crawlward_signatures" directive/,
		'crawlward_signatures' ],
	[ 'crawlward_signatures replay zone too small', "crawlward_signatures keys=$d/ranges.json replay=r1:1k;", '',
		qr/zone "r1" is too small in "crawlward_signatures" directive/,
		'crawlward_signatures' ],
	[ 'crawlward_signatures keys=/nonexistent', 'crawlward_signatures keys=/nonexistent/keys.json;', '',
		qr!"crawlward_signatures" directive: cannot read "/nonexistent/keys\.json": No such file or directory!,
		'crawlward_signatures' ],
	[ 'crawlward_signatures with a ranges file for keys', "crawlward_signatures keys=$d/ranges.json;", '',
		qr/"crawlward_signatures" directive: "\Q$d\E\/ranges\.json": not a key file of format 1/,
		'crawlward_signatures' ],
	[ 'crawlward_robots_kept in a server', '', 'crawlward_robots_kept /tmp;',
		qr/"crawlward_robots_kept" directive is not allowed here/,
		'crawlward_robots_kept' ],
	[ 'crawlward_catalogue twice', "$CATALOGUE $CATALOGUE", '',
		qr/"crawlward_catalogue" directive is duplicate/,
		'crawlward_catalogue' ],
	[ 'crawlward_catalogue in a server', '', $CATALOGUE,
		qr/"crawlward_catalogue" directive is not allowed here/,
		'crawlward_catalogue' ],
	[ 'crawlward on without crawlward_catalogue', '', 'crawlward on;',
		qr/"crawlward on" needs a "crawlward_catalogue"/,
		'crawlward' ],
	[ 'crawlward_status without crawlward_zone', $CATALOGUE,
		'location = /s { crawlward_status; }',
		qr/"crawlward_status" needs a "crawlward_zone"/,
		'crawlward_status' ],
	[ 'crawlward_status with an argument', "$CATALOGUE $ZONE",
		'location = /s { crawlward_status on; }',
		qr/invalid number of arguments in "crawlward_status" directive/,
		'crawlward_status' ],
	[ 'crawlward_status in a server', "$CATALOGUE $ZONE", 'crawlward_status;',
		qr/"crawlward_status" directive is not allowed here/,
		'crawlward_status' ],
	[ 'crawlward_dns_cache without a resolver', "$CATALOGUE $DNS", 'crawlward on;',
		qr/"crawlward_dns_cache" needs a "resolver" where "crawlward" is on/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache without zone=', "$CATALOGUE $RESOLVER crawlward_dns_cache verified=1d;", '',
		qr/"crawlward_dns_cache" directive needs zone=name:size/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache verified=soon', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m verified=soon;", '',
		qr/invalid parameter "verified=soon" in "crawlward_dns_cache" directive: expected a time from 1s to 365d/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache stale_verified=soon', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m stale_verified=soon;", '',
		qr/invalid parameter "stale_verified=soon" in "crawlward_dns_cache" directive: expected a time from 1s to 365d, e\.g\. 6h, or off/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache spoofed=500ms', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m spoofed=500ms;", '',
		qr/invalid parameter "spoofed=500ms".*from 1s/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache max_lookups=0', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m max_lookups=0;", '',
		qr/invalid parameter "max_lookups=0".*at least 1/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache unresolved_as=verified', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m unresolved_as=verified;", '',
		qr/invalid parameter "unresolved_as=verified".*unverified or spoofed/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache ttl=1d', "$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:1m ttl=1d;", '',
		qr/invalid parameter "ttl=1d".*unknown parameter/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache twice', "$CATALOGUE $RESOLVER $DNS crawlward_dns_cache zone=dns2:1m;", '',
		qr/"crawlward_dns_cache" directive is duplicate/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache on the counters zone', "$CATALOGUE $RESOLVER $ZONE crawlward_dns_cache zone=crawlward:1m;", '',
		qr/zone "crawlward" in "crawlward_dns_cache" directive is already used/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache on the counters zone, another size', "$CATALOGUE $RESOLVER crawlward_zone zone=dns:2m; $DNS", '',
		qr/zone "dns" in "crawlward_dns_cache" directive is already used by "crawlward_zone"/,
		'crawlward_dns_cache' ],
	[ 'crawlward_dns_cache with another size', "$CATALOGUE $RESOLVER $DNS limit_req_zone \$binary_remote_addr zone=dns:2m rate=1r/s;", '',
		qr/shared memory zone "dns" is already declared for a different use/,
		'limit_req_zone' ],
	[ 'crawlward_budget_zone on the counters zone', "$CATALOGUE $ZONE crawlward_budget_zone zone=crawlward:1m;", '',
		qr/zone "crawlward" in "crawlward_budget_zone" directive is already used by "crawlward_zone"/,
		'crawlward_budget_zone' ],
	[ 'crawlward_zone on a budget zone', "$CATALOGUE crawlward_budget_zone zone=crawlward:1m; $ZONE", '',
		qr/zone "crawlward" in "crawlward_zone" directive is already used by "crawlward_budget_zone"/,
		'crawlward_zone' ],
	[ 'crawlward_budget_zone on the DNS cache zone', "$CATALOGUE $RESOLVER $DNS crawlward_budget_zone zone=dns:1m;", '',
		qr/zone "dns" in "crawlward_budget_zone" directive is already used by "crawlward_dns_cache"/,
		'crawlward_budget_zone' ],
	[ 'limit_req_zone on a budget zone', "$CATALOGUE crawlward_budget_zone zone=b:1m; limit_req_zone \$binary_remote_addr zone=b:1m rate=1r/s;", '',
		qr/shared memory zone "b" is already declared for a different use/,
		'limit_req_zone' ],
	[ 'crawlward_dns_cache in a server', "$CATALOGUE $RESOLVER", $DNS,
		qr/"crawlward_dns_cache" directive is not allowed here/,
		'crawlward_dns_cache' ],
	[ 'crawlward_budget_zone without zone=', "$CATALOGUE crawlward_budget_zone agents=5;", '',
		qr/"crawlward_budget_zone" directive needs zone=name:size/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone agents=0', "$CATALOGUE crawlward_budget_zone zone=b:1m agents=0;", '',
		qr/invalid parameter "agents=0".*from 1 to 65536/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone lag=soon', "$CATALOGUE crawlward_budget_zone zone=b:1m lag=soon;", '',
		qr/invalid parameter "lag=soon".*from 1ms to 60s, or off/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone sync= without nodes=', "$CATALOGUE crawlward_budget_zone zone=b:1m sync=valkey://127.0.0.1:6379;", '',
		qr/"crawlward_budget_zone" directive with sync= needs nodes=N/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone sync=http://', "$CATALOGUE crawlward_budget_zone zone=b:1m sync=http://127.0.0.1:6379 nodes=2;", '',
		qr/invalid parameter "sync=http:\/\/127.0.0.1:6379".*expected valkey:\/\/host:port\[\/db\]/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone sync= with a password', "$CATALOGUE crawlward_budget_zone zone=b:1m sync=redis://u:pw\@127.0.0.1:6379 nodes=2;", '',
		qr/credentials are not supported/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone sync_interval=1ms', "$CATALOGUE crawlward_budget_zone zone=b:1m sync=valkey://127.0.0.1:6379 nodes=2 sync_interval=1ms;", '',
		qr/invalid parameter "sync_interval=1ms".*from 10ms to 10s/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone nodes= without sync=', "$CATALOGUE crawlward_budget_zone zone=b:1m nodes=2;", '',
		qr/sync_interval=, sync_timeout= and nodes= need sync=/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget_zone sync= to a host not found', "$CATALOGUE crawlward_budget_zone zone=b:1m sync=valkey://no-such-host.invalid:6379 nodes=2;", '',
		qr/host not found in "sync=valkey:\/\/no-such-host.invalid:6379\/0"/,
		'crawlward_budget_zone' ],
	[ 'crawlward_browse_cap without max=', "$CATALOGUE crawlward_budget_zone zone=b:1m;", 'crawlward_browse_cap zone=b;',
		qr/"crawlward_browse_cap" directive needs zone=name and max=number/,
		'crawlward_browse_cap' ],
	[ 'crawlward_browse_cap on an unknown zone', $CATALOGUE, 'crawlward_browse_cap zone=nope max=4;',
		qr/invalid parameter "zone=nope".*no such zone/,
		'crawlward_browse_cap' ],
	[ 'crawlward_browse_cap max=0', "$CATALOGUE crawlward_budget_zone zone=b:1m;", 'crawlward_browse_cap zone=b max=0;',
		qr/invalid parameter "max=0".*from 1 to 1000000/,
		'crawlward_browse_cap' ],
	[ 'crawlward_budget_zone twice', "$CATALOGUE crawlward_budget_zone zone=b:1m; crawlward_budget_zone zone=b:1m;", '',
		qr/duplicate zone "b:1m" in "crawlward_budget_zone" directive/,
		'crawlward_budget_zone' ],
	[ 'crawlward_budget on an unknown zone', $CATALOGUE, 'crawlward_budget zone=nope;',
		qr/invalid parameter "zone=nope".*no such zone/,
		'crawlward_budget' ],
	[ 'crawlward_budget address=60r/w', "$CATALOGUE crawlward_budget_zone zone=b:1m;", 'crawlward_budget zone=b address=60r/w,6r/m;',
		qr/invalid parameter "address=60r\/w,6r\/m".*r\/s, r\/m, r\/h or r\/d/,
		'crawlward_budget' ],
	[ 'crawlward_budget without zone=', "$CATALOGUE crawlward_budget_zone zone=b:1m;", 'crawlward_budget address=1r/m,1r/m;',
		qr/"crawlward_budget" directive needs zone=name/,
		'crawlward_budget' ],
	[ 'crawlward_budget with other units on the same zone', "$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward_budget zone=b address=60r/m,6r/m; location /x { crawlward_budget zone=b address=1000r/h,6r/m; }',
		qr/"crawlward_budget" directive on zone "b" uses other time units/,
		'crawlward_budget' ],
	[ 'crawlward_budget with other units for verified on the same zone', "$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward_budget zone=b verified=600r/m,60r/m; location /x { crawlward_budget zone=b verified=600r/h,60r/h; }',
		qr/"crawlward_budget" directive on zone "b" uses other time units/,
		'crawlward_budget' ],
	[ 'crawlward_budget verified_until=tomorrow', "$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward_budget zone=b verified=600r/m,60r/m verified_until=tomorrow;',
		qr/invalid parameter "verified_until=tomorrow" in "crawlward_budget" directive: expected an RFC 3339 time/,
		'crawlward_budget' ],
	[ 'crawlward_budget verified_until= without verified=', "$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward_budget zone=b verified_until=2026-12-07T06:00:00Z;',
		qr/"crawlward_budget" directive: verified_until= ends nothing without verified=/,
		'crawlward_budget' ],
	[ 'crawlward_budget_signed_in cookie', $CATALOGUE, 'crawlward_budget_signed_in cookie;',
		qr/invalid parameter "cookie".*expected a variable/,
		'crawlward_budget_signed_in' ],
	[ 'crawlward_facets without names', $CATALOGUE, 'crawlward_facets crawler_max_params=4;',
		qr/"crawlward_facets" directive needs names= or prefixes=/,
		'crawlward_facets' ],
	[ 'crawlward_facets crawler_max_params=0', $CATALOGUE, 'crawlward_facets names=a crawler_max_params=0;',
		qr/invalid parameter "crawler_max_params=0".*at least 1/,
		'crawlward_facets' ],
	[ 'crawlward_facets max_facets=17, the name before the policy\'s', $CATALOGUE, 'crawlward_facets names=a max_facets=17;',
		qr/invalid parameter "max_facets=17".*from 1 to 16/,
		'crawlward_facets' ],
	[ 'crawlward_facets exempt_verified=yes', $CATALOGUE, 'crawlward_facets names=a exempt_verified=yes;',
		qr/invalid parameter "exempt_verified=yes".*on or off/,
		'crawlward_facets' ],
	[ 'crawlward_api_tier hourly=0', "$CATALOGUE crawlward_api_tier gold hourly=0;", '',
		qr/invalid parameter "hourly=0" in "crawlward_api_tier" directive: expected hourly=N or daily=N, N at least 1/,
		'crawlward_api_tier' ],
	[ 'crawlward_api_tier twice', "$CATALOGUE crawlward_api_tier gold; crawlward_api_tier gold;", '',
		qr/duplicate tier "gold"/,
		'crawlward_api_tier' ],
	[ 'crawlward_api_keys with a missing file', "$CATALOGUE crawlward_api_keys $d/nope.json;", '',
		qr/"crawlward_api_keys" directive: cannot read ".*nope\.json"/,
		'crawlward_api_keys' ],
	[ 'crawlward_api_keys with a broken file', "$CATALOGUE crawlward_api_keys $d/broken-keys.json;", '',
		qr/"crawlward_api_keys" directive: ".*broken-keys\.json": account "a": sha256 must be 64 hex digits/,
		'crawlward_api_keys' ],
	[ 'crawlward_quota without an account', "$CATALOGUE crawlward_budget_zone zone=q:1m;", 'crawlward_quota zone=q;',
		qr/"crawlward_quota" directive needs account=\$variable or keys=on/,
		'crawlward_quota' ],
	[ 'crawlward_quota with an unknown account_names', "$CATALOGUE crawlward_budget_zone zone=q:1m;", 'crawlward_quota zone=q account=$remote_user account_names=lower;',
		qr/invalid parameter "account_names=lower" in "crawlward_quota" directive: expected account_names=exact or account_names=folded/,
		'crawlward_quota' ],
	[ 'crawlward_quota keys=on without keys', "$CATALOGUE crawlward_budget_zone zone=q:1m;", 'crawlward_quota zone=q keys=on;',
		qr/"crawlward_quota" directive with keys=on needs "crawlward_api_keys"/,
		'crawlward_quota' ],
	[ 'crawlward_quota on a budget zone', "$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward_budget zone=b; location /api/ { crawlward_quota zone=b account=$remote_user; }',
		qr/"crawlward_quota" directive: zone "b" counts crawl budgets: give quotas a zone of their own/,
		'crawlward_quota' ],
	[ 'crawlward_budget on a quota zone', "$CATALOGUE crawlward_budget_zone zone=q:1m;",
		'crawlward_quota zone=q account=$remote_user; location /x { crawlward_budget zone=q; }',
		qr/"crawlward_budget" directive: zone "q" holds API quotas/,
		'crawlward_budget' ],
	[ 'crawlward_quota with an unknown default tier', "$CATALOGUE crawlward_budget_zone zone=q:1m; crawlward_api_tier gold;",
		'crawlward_quota zone=q account=$remote_user default=silver;',
		qr/"crawlward_quota" directive: no tier "silver"/,
		'crawlward_quota' ],
	[ 'crawlward_api_tier after crawlward_quota', "$CATALOGUE crawlward_budget_zone zone=q:1m; crawlward_quota zone=q account=\$remote_user; crawlward_api_tier gold;", '',
		qr/"crawlward_api_tier" directive must come before "crawlward_api_keys" and "crawlward_quota"/,
		'crawlward_api_tier' ],
	[ 'crawlward_quota without a catalogue', 'crawlward_budget_zone zone=q:1m;', 'crawlward_quota zone=q account=$remote_user;',
		qr/"crawlward_quota" directive needs a "crawlward_catalogue"/,
		'crawlward_quota' ],
);

my @good = (
	[ 'the rendered snippets', "include $dir/crawlward-http.conf;",
		"include $dir/crawlward-server.conf;" ],
	[ 'a synced budget zone and a browse cap (nginx -t connects to nothing)',
		"$CATALOGUE crawlward_budget_zone zone=b:1m sync=valkey://127.0.0.1:9/3 nodes=3 sync_interval=200ms sync_timeout=2s;",
		'crawlward on; location /browse { crawlward_browse_cap zone=b max=12; } location /x { crawlward_browse_cap off; }' ],
	[ 'everything by hand', "$CATALOGUE $ZONE crawlward on; crawlward_dry_run off;",
		'crawlward off; location / { crawlward on; crawlward_dry_run on; } '
		. 'location = /s { crawlward_status; }' ],
	[ 'a relative crawlward_catalogue, a 32k zone',
		'crawlward_catalogue ' . substr($cat, length("$d/")) . '; '
		. 'crawlward_zone zone=z:32k;', 'crawlward on;' ],
	[ 'crawlward off without a catalogue', '', 'crawlward off; crawlward_dry_run on;' ],
	[ 'the variables without crawlward on', $CATALOGUE,
		'location / { add_header X-A $crawlward_agent$crawlward_action; }' ],
	[ 'crawlward_dns_cache with every parameter',
		"$CATALOGUE $RESOLVER crawlward_dns_cache zone=dns:64k verified=12h spoofed=30m "
		. 'unresolved=10s max_lookups=8 unresolved_as=spoofed;',
		'crawlward on; location / { add_header X-D $crawlward_dns$crawlward_dns_cache; }' ],
	[ 'crawlward_dns_cache, resolver in the server', "$CATALOGUE $DNS", "$RESOLVER crawlward on;" ],
	[ 'crawlward_dns_cache without crawlward on needs no resolver', "$CATALOGUE $DNS", '' ],
	[ 'facets and budgets with every parameter',
		"$CATALOGUE crawlward_budget_zone zone=b:1m agents=32 lag=20ms shrink=2;",
		'crawlward on; crawlward_budget zone=b address=10r/s,1r/s agent=1000r/h,100r/h shared=20000r/d,2000r/d; '
		. 'crawlward_budget_signed_in $cookie_sid $http_authorization; '
		. 'crawlward_facets names=subjects,place+name prefixes=f_ crawler_max_params=5 max_facets_without_referer=3 '
		. 'same_site=example.org exempt_verified=on retry_after=10; '
		. 'location /x { crawlward_budget off; crawlward_facets off; } '
		. 'location /y { add_header X-F $crawlward_params$crawlward_facets$crawlward_facet_rule$crawlward_budget; }' ],
	[ 'API quotas with every parameter',
		"$CATALOGUE crawlward_budget_zone zone=q:1m sync=valkey://127.0.0.1:9/3 nodes=2; "
		. "crawlward_api_tier standard; crawlward_api_tier gold hourly=5000 daily=50000; "
		. "crawlward_api_keys $d/keys.json header=Api-Key;",
		'crawlward_quota zone=q paths=/api/v2/,/api/v3/ account=$remote_user account=$jwt_sub keys=on tier=$api_tier default=gold; '
		. 'set $jwt_sub ""; set $api_tier ""; '
		. 'location /x { crawlward_quota off; add_header X-Q $crawlward_account$crawlward_tier; }' ],
	[ 'a verified budget in one location of a zone, none in another',
		"$CATALOGUE crawlward_budget_zone zone=b:1m;",
		'crawlward on; crawlward_budget zone=b verified=600r/h,60r/h; location /x { crawlward_budget zone=b; }' ],
);

# those whose [emerg] line does not name the directive yet: nginx's own
# ngx_shared_memory_add() message
my %UNNAMED = map { $_ => 1 } (
	'crawlward_zone on a limit_req zone',
	'crawlward_dns_cache with another size',
	'limit_req_zone on a budget zone',
);

$t->plan(4 * @bad + 2 * @good + 2);

###############################################################################

# write <name>.conf and run nginx -t on it: (exit status, stderr and stdout)
sub nginx_t {
	my ($t, $file, $http, $server) = @_;
	my $d = $t->testdir();

	$t->write_file_expand($file, <<"EOF");

%%TEST_GLOBALS%%

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    $http

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        $server
    }
}

EOF

	my @cmd = ($Test::Nginx::NGINX, '-t', '-p', "$d/", '-c', "$d/$file",
		'-e', "$d/t.log");

	my ($status, $out) = run_bounded($T_WAIT, @cmd);
	return $status == -1 ? (-1, $out) : ($status >> 8, $out);
}

my $n = 0;

for my $c (@bad) {
	my ($name, $http, $server, $re, $directive) = @$c;
	my $file = 'bad-' . ++$n . '.conf';

	my ($rc, $out) = nginx_t($t, $file, $http, $server);
	my ($emerg) = $out =~ /^(.*\[emerg\].*)$/m;
	$emerg //= '';

	Test::More::note("$name: $emerg");

	is($rc, 1, "$name: nginx -t exits 1");
	like($out, qr/test failed/, "$name: test failed");
	like($emerg, qr/^nginx: \[emerg\] .*$re.* in \Q$d\/$file\E:\d+$/,
		"$name: [emerg] says what is wrong, with the file and line");

	if ($UNNAMED{$name}) {
		# nginx's own check in ngx_shared_memory_add(), before the module
		# runs: it names the zone, and the file and line of the directive
		like($emerg, qr/shared memory zone "(?:crawlward|dns|b)" (?:is already declared for a different use|conflicts)/,
			"$name: [emerg] names the zone");
	} else {
		like($emerg, qr/"\Q$directive\E(?: [^"]*)?"/,
			"$name: [emerg] names \"$directive\"");
	}
}

for my $c (@good) {
	my ($name, $http, $server) = @$c;
	my $file = 'good-' . ++$n . '.conf';

	my ($rc, $out) = nginx_t($t, $file, $http, $server);

	is($rc, 0, "$name: nginx -t exits 0");
	like($out, qr/\Q$d\/$file\E test is successful/, "$name: test is successful")
		or diag($out);
}

# an account whose keys give two tiers: its first key's holds for all, with a
# warning (a file that worked before stays one that loads)
my ($two_rc, $two_out) = nginx_t($t, 'two-tiers.conf', "$CATALOGUE crawlward_api_tier gold; crawlward_api_keys $d/two-tier-keys.json;", '');
is($two_rc, 0, 'an account in two tiers: nginx -t exits 0');
like($two_out, qr/^nginx: \[warn\] "crawlward_api_keys" directive: ".*two-tier-keys\.json": account "acme": its keys give two tiers \(gold and none\); .*its first key's, gold, holds in \Q$d\/two-tiers.conf\E:\d+$/m,
	'an account in two tiers: [warn] says which tier holds');

###############################################################################
