#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder, on the proportional
# classifier article's eight clients replayed as live traffic: each client
# its requests, distinct paths, busiest paths, User-Agents, sessions and
# addresses, and its robots.txt behaviour, scaled to a 24-minute window
# (the table's 24 hours, a minute for an hour; the three clients whose rate
# is past the rate sub-score's saturation are sent 750 or 3000 requests,
# still saturated). The module places each on the article's rung, with its score
# within 0.02 (and the credential-stuffing client routed off the ladder);
# then, with verified identity allowlisted (the search crawler verified by
# its published range, the SEO tool signed in), no legitimate client is at
# L3 or above.

use warnings;
use strict;

use Test::More;

use List::Util qw/ shuffle /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(24);

my $d = $t->testdir();
write_page($t);
$t->write_file('cookie.key', "test-key-0123456789abcdef0123456789abcdef\n");
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-ladder
  throttle_log: /var/log/nginx/ladder-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
actions:
  scripting: allow
  automation: allow
robots:
  crawl_delay: 1
module:
  status: /crawlward-status
classifier:
  mode: observe
  window: 24m
  auth_paths: [/login, /api/session, /account/]
  session_cookie: sess
  cookie:
    key_file: $d/cookie.key
EOF
my $dir = render($t, "$d/policy.yaml");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        crawlward_budget_signed_in \$remote_user;
        add_header X-Rung \$crawlward_rung always;
        add_header X-Score \$crawlward_score always;
        add_header X-Contributions \$crawlward_contributions always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36';
my $HEADLESS = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36';
my $SAFARI = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 '
	. '(KHTML, like Gecko) Version/18.0 Safari/605.1.15';
my $FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 '
	. 'Firefox/133.0';
my %UA = (
	'chrome/131' => sprintf($CHROME, 131),
	'chrome/130' => sprintf($CHROME, 130),
	'headless-chrome/131' => $HEADLESS,
	'safari/18' => $SAFARI,
	'firefox/133' => $FIREFOX,
);

# One client of the article's table, as traffic: the paths with their hits
# (any order), the User-Agents with their share of requests, the sessions
# (requests, addresses), and whether it fetches robots.txt and the sitemap
# first. Requests without a session come from `addresses` addresses.
sub traffic {
	my (%c) = @_;
	my @paths = map { ($_->[0]) x $_->[1] } @{ $c{paths} };
	my $n = @paths;
	@paths = shuffle(@paths);
	my @agents = map { ($_->[0]) x int($_->[1] * $n / 100 + 0.999) }
		@{ $c{agents} };
	my @sessions;
	my $s = 0;
	for my $session (@{ $c{sessions} || [] }) {
		my ($requests, $addresses) = @$session;
		push @sessions, map { [$s, $_ % $addresses] } 0 .. $requests - 1;
		$s++;
	}
	push @sessions, [undef, $_ % ($c{addresses} || 1)]
		for scalar @sessions .. $n - 1;
	@sessions = shuffle(@sessions);
	my @out;
	# robots.txt and the sitemap first, as the client's first request (same session, same address)
	my %first = (ua => $agents[0], session => $sessions[0][0], address => $sessions[0][1]);
	push @out, { path => '/robots.txt', %first } if $c{robots};
	push @out, { path => '/sitemap.xml', %first } if $c{sitemap};
	for my $i (0 .. $n - 1) {
		my ($session, $address) = @{ $sessions[$i] };
		push @out, {
			path => $paths[$i],
			ua => $agents[int($i * @agents / $n)],
			session => $session,
			address => $address,
		};
	}
	return \@out;
}

# Send a client's requests, as a browser would: the cookie the first answer
# sets comes back on every request after it. Returns the last answer (and,
# in list context, the cookie).
sub replay {
	my ($name, $net, $requests, %o) = @_;
	my $cookie;
	my $last;
	for my $q (@$requests) {
		my @cookies;
		push @cookies, "__Host-crawlward=$cookie" if defined $cookie;
		push @cookies, "sess=$name-$q->{session}" if defined $q->{session};
		my $s = defined $q->{session} ? $q->{session} + 1 : 0;
		my $from = $o{from} // "10.$net.$s." . (($q->{address} // 0) + 1);
		my @headers;
		push @headers, 'Cookie: ' . join('; ', @cookies) if @cookies;
		push @headers, "Authorization: Basic $o{account}" if $o{account};
		my $ua = $UA{$q->{ua}} // $q->{ua};
		$last = get($q->{path}, ua => $ua, xff => $from, headers => \@headers);
		my ($set) = ($last // '') =~ /^Set-Cookie: __Host-crawlward=([^;\s]+)/mi;
		$cookie = $set if defined $set;
	}
	return wantarray ? ($last, $cookie) : $last;
}

srand(20261205);

my $partner = traffic(
	paths => [['/api/price', 70], ['/api/stock', 52], ['/api/catalog', 22]],
	agents => [['PartnerFeed/2.1 (+https://partner.example/contact)', 100]],
	sessions => [[144, 1]], robots => 1, sitemap => 1);
my $search_ua = 'Mozilla/5.0 (compatible; ExampleSearchBot/1.0; '
	. '+https://search.example/bot) Chrome/131.0.0.0 Safari/537.36';
my $search = traffic(
	paths => [map { ["/p/$_", 1] } 1 .. 686],
	agents => [[$search_ua, 100]],
	sessions => [([43, 1]) x 4], addresses => 30, robots => 1, sitemap => 1);
my $academic = traffic(
	paths => [['/archive/2026', 15], ['/archive/2025', 15], ['/search', 10],
		['/docs/113', 3]],
	agents => [["$FIREFOX (+https://uni.example/study)", 100]],
	sessions => [[43, 1]], robots => 1);
my $seo = traffic(
	paths => [(map { ["/p/$_", 1] } 1 .. 297), (map { ["/q/$_", 2] } 1 .. 5)],
	agents => [['headless-chrome/131', 34], ['chrome/130', 33],
		['chrome/131', 33]],
	sessions => [([77, 6]) x 3], addresses => 6, robots => 1, sitemap => 1);
my $archiver = traffic(
	paths => [map { ["/blog/$_", 1] } 1 .. 12],
	agents => [['firefox/133', 100]],
	sessions => [[12, 1]], robots => 1);
# the flash-sale monitor: 3000 requests, so that its nine lesser busy paths
# (1.5% of its requests each) stand out of its one-off paths as they do in a day
my $flash = traffic(
	paths => [['/checkout/session', 1029], ['/cart', 882],
		(map { ["/p/$_", 44] } 1 .. 9), ['/account/login', 60],
		(map { ["/t/$_", $_ <= 33 ? 2 : 1] } 1 .. 600)],
	agents => [['chrome/131', 61], ['chrome/130', 20], ['safari/18', 11],
		['firefox/133', 8]],
	sessions => [([1000, 74]) x 3]);
my $resale = traffic(
	paths => [map { ["/event/$_", 1] } 1 .. 750],
	agents => [['chrome/131', 44], ['chrome/130', 25],
		['headless-chrome/131', 20], ['safari/18', 11]],
	sessions => [([187, 22]) x 4], sitemap => 1);
my $stuffing = traffic(
	paths => [['/login', 613], ['/api/session', 106], ['/account/reset', 31]],
	agents => [['python-requests/2.32.3', 100]],
	sessions => [([19, 10]) x 39, [9, 10]]);

# the article's table: score and rung
my @table = (
	['partner-price-feed', $partner, 0.09, 'L0'],
	['verified-search-crawler', $search, 0.59, 'L3'],
	['academic-longitudinal-study', $academic, 0.09, 'L0'],
	['seo-audit-crawler', $seo, 0.68, 'L4'],
	['personal-archiver', $archiver, 0.42, 'L2'],
	['flash-sale-monitor', $flash, 0.61, 'L4'],
	['resale-listing-republisher', $resale, 0.90, 'L6'],
	['credential-stuffing', $stuffing, 0.45, 'routed'],
);

my $net = 0;
my %cookie;
for my $row (@table) {
	my ($name, $requests, $score, $rung) = @$row;
	my ($r, $cookie) = replay($name, ++$net, $requests);
	$cookie{$name} = $cookie;
	my $got = header($r, 'X-Score') // '';
	my $why = header($r, 'X-Contributions') // '';
	ok($got ne '' && abs($got - $score) <= 0.02,
		"$name: score $got, the table's $score ($why)");
	is(header($r, 'X-Rung'), $rung, "$name: $rung");
}

# the status counts the clients on each rung and the routed ones
my $st = module_status('/crawlward-status');
my %rung = map { $_->{rung} => $_ } @{ $st->{ladder}{rungs} || [] };
is($rung{routed}{requests}, 750, 'status: the routed client\'s requests') or diag(explain($st->{ladder}));
ok(($rung{L6}{clients} // 0) >= 1, 'status: the republisher on L6');
is($st->{ladder}{mode}, 'observe', 'status: observe mode');

# with verified identity allowlisted: the search crawler verified by its
# published range, the SEO tool signed in
my @googlebot = map { { %$_, ua => 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)' } } @$search;
my $r = replay('googlebot', 100, \@googlebot, from => '127.0.0.2');
is(header($r, 'X-Rung'), 'L0', 'verified search crawler: L0');
is(header($r, 'X-Score') // '', '', 'verified search crawler: not scored');
$r = replay('seo-signed-in', 101, $seo, account => 'c2VvOnNlY3JldA==');
is(header($r, 'X-Rung'), 'L0', 'signed-in SEO tool: L0');

# robots.txt answers 200 at any rung: the republisher, on L6, asks for it
$r = get('/robots.txt', ua => $UA{'chrome/131'}, xff => '10.7.1.1',
	headers => ["Cookie: __Host-crawlward=$cookie{'resale-listing-republisher'}"]);
like(header($r, 'X-Rung'), qr/^L[56]\z/, 'robots.txt: asked at L5 or above (fetching it counts as a rule kept)');
like($r, qr!^HTTP/1\.[01] 200!, 'robots.txt at a high rung: 200');

###############################################################################
