#!/usr/bin/perl

# The protections tried from the attacker's side (the promise taken from
# Google's crawler documentation: a verified search crawler gets a 429 or
# 5xx only from a limit written for it, and robots.txt always answers 200),
# with the module and a policy rendered
# with crawl_budget: robots.txt is never refused nor counted; verified
# crawlers are out of the budgets and the browse cap unless a budget is
# written for them, and nobody else's traffic can spend it; catalogue agents
# keep their own slots however many names others rotate; a made-up
# Authorization header or session cookie is budgeted; decisions are made on
# the normalized $uri and on query names as PHP reads them; machine doors are
# not budgeted; a request the facet guard refuses takes no place in the
# browse cap; an error_page shows its page after a refusal.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT http_end /;
use Crawlward::Test;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $BINGBOT = 'Mozilla/5.0 (compatible; bingbot/2.0)';
my $BOT = SELF_DECLARED_BOT;
my $HOLD_MAX = 10;

my $t = Test::Nginx->new()
	->has(qw/http realip map limit_conn limit_req proxy/)->plan(43);

my $dir = render($t, 't/policies/protect.yaml');
my $d = $t->testdir();
write_page($t);
$t->write_file('www/busy.html', "custom busy page\n");
$t->write_file('www/forbidden.html', "custom forbidden page\n");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    crawlward_budget_zone zone=names:1m agents=16;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Budget "\$crawlward_budget" always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        location /glam/browse {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        # a budget written for verified crawlers (a deliberate slowdown)
        location /slow/ {
            crawlward_budget zone=crawlward_budget address=6r/m,3r/m agent=60r/m,30r/m shared=60r/m,30r/m verified=5r/m,3r/m;
            root $d/www;
            try_files /page.html =404;
        }

        # the same budget on purpose, ended: not counted any more
        location /slow-ended/ {
            crawlward_budget zone=names address=6r/m,3r/m agent=60r/m,30r/m shared=60r/m,30r/m verified=5r/m,3r/m verified_until=2020-01-01T00:00:00Z;
            root $d/www;
            try_files /page.html =404;
        }

        # and not ended yet
        location /slow-until/ {
            crawlward_budget zone=crawlward_budget address=6r/m,3r/m agent=60r/m,30r/m shared=60r/m,30r/m verified=5r/m,3r/m verified_until=2099-01-01T00:00:00Z;
            root $d/www;
            try_files /page.html =404;
        }

        # agent names apart, in a zone of its own that keeps 16 unknown names
        location /names/ {
            crawlward_budget zone=names address=100r/m,100r/m agent=3r/m,3r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }

        location /custom/ {
            error_page 429 /busy.html;
            error_page 403 /forbidden.html;
            root $d/www;
            try_files /page.html =404;
        }

        location = /busy.html {
            root $d/www;
        }

        location = /forbidden.html {
            root $d/www;
        }
    }
}

EOF

$t->run_daemon(\&held_backend, port(8081), $d, $HOLD_MAX);
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start backend on port " . port(8081) . "\n";

###############################################################################

sub budget_zone {
	my ($name) = @_;
	my $st = module_status('/crawlward-status') or return {};
	my ($z) = grep { $_->{zone}{name} eq $name } @{ $st->{budgets} || [] };
	return $z || {};
}

# 1. robots.txt is never refused, nor counted
is(outcomes(4, '/deep/x', xff => '192.0.2.1'), '200 x3, 429 address-deep x1',
	'a crawler spends its deep budget');
my $before = budget_zone('crawlward_budget')->{passed};
is(outcomes(20, '/robots.txt', xff => '192.0.2.1'), '200 x20',
	'robots.txt: 20 requests from the spent address, all 200');
is(outcome('/robots.txt', xff => '192.0.2.1', ua => undef), '200', 'robots.txt: no User-Agent, 200');
is(budget_zone('crawlward_budget')->{passed}, $before, 'robots.txt is not counted');

# 2. a verified crawler is out of the budgets unless one is written for it
is(outcomes(30, '/deep/g', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200 x30',
	'verified Googlebot, no verified budget: 30 deep requests, all 200');

# 4. signed in is decided by the server: with the rendered defaults a made-up
# Authorization header or session cookie is budgeted
is(outcomes(4, '/deep/auth', xff => '192.0.2.20', headers => [ 'Authorization: anything' ]),
	'200 x3, 429 address-deep x1', 'a made-up Authorization header is budgeted');
is(outcomes(4, '/deep/cookie', xff => '192.0.2.21', headers => [ 'Cookie: laravel_session=made-up' ]),
	'200 x3, 429 address-deep x1', 'a made-up session cookie is budgeted');

# 5. decided on what the application will see
for my $uri ('/glam/%62rowse?subjects=1&places=2', '/glam//browse?subjects=1&places=2',
	'/glam/./browse?subjects=1&places=2', '/glam/x/../browse?subjects=1&places=2',
	'/glam/browse?+subjects=1&places=2', '/glam/browse?subjects%00evil=1&places=2',
	'/glam/browse?subjects[]=1&pl%61ces=2')
{
	is(outcome($uri, ua => BROWSER), '429', "facet guard on $uri: 429");
}
is(outcomes(4, '/alice/repo/bl%6fb/x', xff => '192.0.2.30'), '200 x3, 429 address-deep x1',
	'bl%6fb is blob: a deep path');
is(outcomes(4, '/alice//repo/./blob/x', xff => '192.0.2.31'), '200 x3, 429 address-deep x1',
	'//, /./: a deep path');

# 6. machine doors have their rate classes, not the budgets (the API is
# under robots.txt's Disallow: /api)
is(outcomes(20, '/api/v1/records', xff => '192.0.2.40'), '200 x20',
	'a script on the machine door: 20 requests, all 200');

# 7. the browse cap (2 in flight): verified crawlers take no place in it, and
# a request the facet guard refuses gets its 429, not the cap's 503
my @held = map { get("/glam/browse?page=$_", ua => BROWSER, xff => "198.51.100.$_", start => 1) } 1 .. 2;
is(wait_backend($d, qr/browse/, 2, 5), 2, 'two browse requests in flight: the cap is full');
is(outcome('/glam/browse?subjects=1&places=2', ua => BROWSER, xff => '198.51.100.9'), '429',
	'the facet guard refuses first: 429, not 503');
is(outcome('/glam/browse?page=9', ua => BROWSER, xff => '198.51.100.10'), '503',
	'a person past the cap: 503');
push @held, get('/glam/browse?page=g', ua => $GOOGLEBOT, xff => '127.0.0.2', start => 1);
is(wait_backend($d, qr/browse/, 3, 5), 3, 'verified Googlebot past the full cap: reaches the site');
$t->write_file('release', '');
is(status(http_end($held[2])), 200, 'verified Googlebot: 200');
http_end($_) for @held[0, 1];

# 8. after a refusal, an error_page shows its page; nothing is spent twice
is(outcomes(6, '/custom/x', xff => '192.0.2.60'), '200 x6', 'a crawler spends its address budget');
my $spent = budget_zone('crawlward_budget');
my $r = get('/custom/x', ua => $BOT, xff => '192.0.2.60');
is(status($r), 429, 'refused by the budget, with an error_page: 429');
like(body($r) // '', qr/custom busy page/, 'the error_page shows its page');
$r = get('/custom/x', ua => 'Mozilla/5.0 (compatible; SemrushBot/7~bl)', xff => '192.0.2.50');
is(status($r), 403, 'refused by the bot-blocker (403), with an error_page: 403');
like(body($r) // '', qr/custom forbidden page/, 'the error_page shows its page');
my $after = budget_zone('crawlward_budget');
is(($after->{refused}{address} // 0) - ($spent->{refused}{address} // 0), 1,
	'one refusal counted, once');
is($after->{passed}, $spent->{passed}, 'and nothing passed through the error page');

# catalogue agents keep their slot when others fill the names
for my $i (1 .. 40) {
	outcome('/names/x', ua => "Mozilla/5.0 (compatible; Name${i}bot/1.0)", xff => "10.8.0.$i");
}
is(budget_zone('names')->{agent_names}, 16, '40 rotated names: 16 kept, the rest share other');
is(outcomes(4, '/names/y', ua => 'Mozilla/5.0 (compatible; Latebot/1.0)', xff => '10.8.1.1'),
	'429 agent x4', 'a new unknown name shares other (spent by the rotation)');
is(outcomes(4, '/names/z', ua => $BINGBOT, xff => '10.8.2.1'), '200 x3, 429 agent x1',
	'bingbot, named in the catalogue: its own slot, never other');
reload_workers($t);
is(outcome('/names/z', ua => $BINGBOT, xff => '10.8.2.2'), '429 agent',
	'after a reload: bingbot\'s slot and its count are still its own');

# 3. nobody else can spend it: 1,000 rotated names from eight addresses spend
# the shared ceiling, then verified Googlebot still gets all it is allowed
for my $i (1 .. 1000) {
	outcome('/deep/rot', ua => "Mozilla/5.0 (compatible; Rot${i}bot/1.0)",
		xff => '10.7.0.' . (1 + $i % 8));
}
is(outcome('/deep/fresh', xff => '10.7.1.1', ua => 'Mozilla/5.0 (compatible; Freshbot/1.0)'), '429 shared-deep',
	'the shared ceiling is spent for unverified crawlers');
is(outcomes(20, '/deep/g2', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200 x20',
	'verified Googlebot after the flood: 20 deep requests, all 200');
is(outcomes(7, '/slow/page', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200 x5, 429 verified x2',
	'verified Googlebot with verified=5r/m: its whole budget after the flood, then 429');
is(outcome('/slow-until/page', ua => $GOOGLEBOT, xff => '127.0.0.2'), '429 verified',
	'a slowdown that has not ended yet: still counted (spent above)');
is(outcomes(7, '/slow-ended/page', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200 x7',
	'a slowdown whose verified_until has passed: verified Googlebot is not counted');
my $z = budget_zone('crawlward_budget');
is_deeply($z->{verified_slowdown}, { until => undef, active => JSON::PP::true() },
	'status: a slowdown with no end on the zone');
is_deeply(budget_zone('names')->{verified_slowdown}, { until => '2020-01-01T00:00:00Z', active => JSON::PP::false() },
	'status: an ended slowdown, and when it ended');
cmp_ok($z->{zone}{keys_used} - $z->{zone}{fixed_agent_slots}, '<', 60,
	'the refused requests of the flood made no keys');

# the status endpoint: what each budget refused
is($z->{refused}{verified}, 3, 'status: refusals by the verified budget (/slow/ twice, /slow-until/ once)');
ok($z->{zone}{fixed_agent_slots} > 0, 'status: the fixed agent slots');

###############################################################################
