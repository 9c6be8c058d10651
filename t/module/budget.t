#!/usr/bin/perl

# ngx_http_crawlward_module's crawl budgets (the forge's crawl-budget review): the
# seventh deep request in a minute from one address answers 429 with
# Retry-After; the address, agent and shared budgets each refuse at their
# limit; a refused request spends nothing; IPv6 addresses share a budget by
# /64; a spoofed Googlebot spends only its own address budget; signed-in
# requests are never counted; rotated agent names stay within the bound;
# two workers agree and a reload keeps the counts; a burst straddling a
# window boundary is refused; a late event loop shrinks every budget; dry
# run; the status endpoint.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use Time::HiRes qw/ time sleep clock_gettime CLOCK_MONOTONIC /;

use Test::Nginx;
use Crawlward::Test;
use JSON::PP;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $BOT = SELF_DECLARED_BOT;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn limit_req/)
	->plan(49);

my $dir = render($t, 't/policies/budget.yaml');
my $d = $t->testdir();
write_page($t);

# the rot zone: the catalogue's fixed slots (one per agent a User-Agent can
# name, two more for one that can be verified, one for no User-Agent) and
# room for about 300 more keys, so that 600 rotated addresses evict
my $catalogue = JSON::PP->new->decode(rendered_file($t, 'crawlward-catalogue.json'));
my $pinned = 1;
for my $a (@{ $catalogue->{agents} }) {
	next unless defined $a->{ua};
	$pinned += (@{ $a->{ranges} || [] } || @{ $a->{rdns_suffixes} || [] }) ? 3 : 1;
}
my $ROT = int((296 + ($pinned + 300) * 148) / 1024) + 16;

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    crawlward_budget_zone zone=forge:1m lag=40ms shrink=4;
    crawlward_budget_zone zone=rot:${ROT}k agents=16;
    crawlward_budget_zone zone=small:1m;
    crawlward_budget_zone zone=watch:1m;
    crawlward_budget_zone zone=second:1m;

    server {
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Budget "\$crawlward_budget" always;

        # the crawl-budget review's address budget (the default), agent and shared budgets
        # out of the way (tested in /small/); a session cookie or a token
        # marks a signed-in request
        location / {
            crawlward_budget zone=forge agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            crawlward_budget_signed_in \$cookie_session \$http_authorization;
            root $d/www;
            try_files /page.html =404;
        }

        # small budgets, to reach each limit in a few requests
        location /small/ {
            crawlward_budget zone=small address=3r/m,2r/m agent=5r/m,3r/m shared=7r/m,4r/m;
            root $d/www;
            try_files /page.html =404;
        }

        # agent and shared budgets out of the way, so that every rotated
        # request passes and makes its keys
        location /rot/ {
            crawlward_budget zone=rot agent=100000r/m,100000r/m shared=100000r/m,100000r/m;
            root $d/www;
            try_files /page.html =404;
        }

        location /watch/ {
            crawlward_budget zone=watch address=2r/m,2r/m agent=100r/m,100r/m shared=100r/m,100r/m;
            crawlward_dry_run on;
            root $d/www;
            try_files /page.html =404;
        }

        location /second/ {
            crawlward_budget zone=second address=3r/s,3r/s agent=100r/s,100r/s shared=100r/s,100r/s;
            root $d/www;
            try_files /page.html =404;
        }

        # no budget here: an internal redirect takes the request to one
        location /redirect/ {
            try_files /nonexistent \@budgeted;
        }

        location \@budgeted {
            crawlward_budget zone=forge agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

sub bot { return "Mozilla/5.0 (compatible; $_[0]/1.0)"; }

# the crawl-budget review's own test: the seventh deep request in a minute from one address
my @codes = map { outcome('/alice/repo/commits', xff => '192.0.2.1') } 1 .. 7;
is(join(' ', @codes[0 .. 5]), '200 200 200 200 200 200', 'six deep requests pass');
is($codes[6], '429 address-deep', 'the seventh deep request: 429 by the address budget');
my $r = get('/alice/repo/commits', ua => $BOT, xff => '192.0.2.1');
like(header($r, 'Retry-After') // '', qr/^\d+$/, '429 carries Retry-After');
cmp_ok(header($r, 'Retry-After') // 0, '>=', 10, 'Retry-After: not before the window slides');
cmp_ok(header($r, 'Retry-After') // 99, '<=', 70, 'Retry-After: within the window and a sixth');
is(outcome('/alice/repo', xff => '192.0.2.1'), '200', 'a shallow page still passes');
is(outcome('/alice/repo/commits', xff => '192.0.2.2'), '200', 'another address: its own budget');

# each budget refuses at its limit (address 3, agent 5, shared 7 a minute)
is(outcomes(5, '/small/a', xff => '198.51.100.1'),
	'200 x3, 429 address x2', 'address budget: 3, then 429');
# the refused requests spent nothing: the agent has 5 - 3 = 2 left
is(outcomes(3, '/small/a', xff => '198.51.100.2'),
	'200 x2, 429 agent x1', 'agent budget: 5 in all, then 429 (refusals spent nothing)');
is(outcomes(3, '/small/a', xff => '198.51.100.3',
	ua => 'Mozilla/5.0 (compatible; Otherbot/2.0)'),
	'200 x2, 429 shared x1', 'shared budget: 7 in all, then 429');
is(outcome('/small/a', xff => '198.51.100.4', ua => 'Mozilla/5.0 Firefox/133.0'),
	'200', 'a browser is not counted');

# IPv6: one /64 shares a budget, another does not
is(outcomes(7, '/deep/x', xff => '2001:db8:1:2::1', ua => bot('Sixbot')), '200 x6, 429 address-deep x1',
	'IPv6: 6 deep requests from one address');
is(outcome('/deep/x', xff => '2001:db8:1:2:aaaa:bbbb:cccc:dddd', ua => bot('Sixbot')), '429 address-deep',
	'IPv6: the same /64 shares the budget');
is(outcome('/deep/x', xff => '2001:db8:1:3::1', ua => bot('Sixbot')), '200', 'IPv6: another /64 has its own');

# a spoofed Googlebot from 127.0.0.3 spends its own budget; the real one from
# 127.0.0.2 still gets in
is(outcomes(10, '/deep/g', ua => $GOOGLEBOT, xff => '127.0.0.3'),
	'200 x6, 429 address-deep x4', 'spoofed Googlebot: its address budget');
is(outcome('/deep/g', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200',
	'real Googlebot from its range: 200');

# signed-in requests are never counted: 18 in a row, all 200
my @signed = map { outcome('/deep/s', xff => '192.0.2.30', ua => bot('Signbot'), headers => [ 'Cookie: session=abc' ]) } 1 .. 18;
is(join(' ', @signed), join(' ', ('200') x 18), 'session cookie: 18 deep requests, all 200');
@signed = map { outcome('/deep/s', xff => '192.0.2.31', ua => bot('Signbot'), headers => [ 'Authorization: Bearer t0ken' ]) } 1 .. 18;
is(join(' ', @signed), join(' ', ('200') x 18), 'token: 18 deep requests, all 200');
is(outcomes(7, '/deep/s', xff => '192.0.2.30', ua => bot('Signbot')), '200 x6, 429 address-deep x1',
	'the same address signed out: counted from zero');
is(outcome('/deep/s', xff => '192.0.2.32', ua => bot('Signbot'), headers => [ 'Cookie: theme=dark' ]), '200',
	'another cookie is not a session');

# no User-Agent counts as a crawler (the bot-blocker refuses it first; in a
# dry run it reaches the budgets)
is(outcomes(3, '/watch/n', xff => '192.0.2.40', ua => undef),
	'200 x2, 200 address x1', 'no User-Agent: counted');

# 600 rotated agent names (and addresses): the name table stays at its bound
for my $i (1 .. 600) {
	outcome('/rot/x', ua => "Mozilla/5.0 (compatible; Rot${i}bot/1.0)",
		xff => '10.9.' . int($i / 256) . '.' . ($i % 256));
}
my $st = module_status('/crawlward-status');
my ($rot) = grep { $_->{zone}{name} eq 'rot' } @{ $st->{budgets} || [] };
ok($rot, 'status: the rot zone');
cmp_ok($rot->{agent_names}, '<=', 16, 'rotated names: at most 16 agent names');
is($rot->{max_agent_names}, 16, 'status: the bound');
cmp_ok($rot->{zone}{keys_used}, '<=', $rot->{zone}{keys}, 'keys within the zone');
cmp_ok($rot->{evictions}, '>', 0, 'rotated addresses: the oldest evicted');
my ($forge) = grep { $_->{zone}{name} eq 'forge' } @{ $st->{budgets} };
is($forge->{refused}{address}, 2 + 2 + 4 + 1, 'status: refusals by the address budget');
my ($small) = grep { $_->{zone}{name} eq 'small' } @{ $st->{budgets} };
is(join(' ', map { $small->{refused}{$_} } qw/ address agent shared /), '2 1 1',
	'status: refusals by budget');
is($small->{top_refused}[0]{agent}, 'Rivetbot', 'status: the most refused agent');
is($small->{top_refused}[0]{refused}, 3, 'status: its refusals');
my $prom = get('/crawlward-status?format=prometheus', ua => undef);
like($prom, qr/^crawlward_budget_refused_total\{zone="small",budget="agent"\} 1$/m,
	'prometheus: refusals by budget');
like($prom, qr/^crawlward_budget_agent_refused_total\{zone="small",agent="Rivetbot"\} 3$/m,
	'prometheus: top refused agents');

# dry run: counted and logged, never refused
is(outcomes(4, '/watch/x', xff => '192.0.2.50'), '200 x2, 200 address x2',
	'dry run: nothing refused, the would-be refusals named');
$st = module_status('/crawlward-status');
my ($watch) = grep { $_->{zone}{name} eq 'watch' } @{ $st->{budgets} };
is($watch->{dry_run_refused}, 3, 'dry run: counted');
ok(wait_error_log($t, qr/dry run, would refuse with 429 \(budget address\): agent "Rivetbot"/),
	'dry run: logged');

# the sliding window: 3 requests late in one second, 3 early in the next;
# a fixed window would let all 6 through (address=3r/s)
sleep_until_fraction(0.80);
my @burst = map { outcome('/second/x', xff => '192.0.2.60') } 1 .. 3;
sleep_until_fraction(0.05);
push @burst, map { outcome('/second/x', xff => '192.0.2.60') } 1 .. 3;
is(scalar(grep { $_ eq '200' } @burst), 3,
	'a burst straddling a window boundary: 3 of 6 pass');
# Retry-After says when the budget has room
$r = get('/second/x', ua => $BOT, xff => '192.0.2.60');
my $ra = header($r, 'Retry-After') // 0;
is(status($r) . " $ra", '429 1', 'Retry-After: 1 second');
sleep($ra);
is(outcome('/second/x', xff => '192.0.2.60'), '200', 'after Retry-After: room again');

# two workers agree: one address over many connections, spread over both
is(outcomes(9, '/x/y/blob/z', xff => '192.0.2.70', ua => bot('Twobot')), '200 x6, 429 address-deep x3',
	'two workers: 6 deep requests in all');
my @pids = worker_pids($t);
is(scalar @pids, 2, 'two workers');

# a reload keeps the counts
reload_workers($t);
is(outcome('/x/y/blob/z', xff => '192.0.2.70', ua => bot('Twobot')), '429 address-deep',
	'after reload: the budget is still spent');
is(outcome('/x/y/blob/z', xff => '192.0.2.71', ua => bot('Twobot')), '200', 'after reload: others pass');

# a late event loop shrinks every budget by 4 (the crawl-budget review: "while the event
# loop averages more than 50 ms late", here 40ms): not in a worker's first
# seconds after the reload above, and not for one late tick
sleep(3.5);
@pids = worker_pids($t);
# (0.2 s, five times the threshold for one tick: 20 ms on average leaves a
# worker slowed by AddressSanitizer or a loaded machine 20 ms of its own)
kill 'STOP', @pids;
sleep(0.2);
kill 'CONT', @pids;
sleep(0.15);
is(outcomes(3, '/deep/tick', xff => '192.0.2.82', ua => bot('Tickbot')), '200 x3',
	'one tick 0.2s late: 20ms on average over a second, no shrink');
ok(!grep({ /budgets divided by/ } split /\n/, $t->read_file('error.log')),
	'one late tick: nothing logged');
# stopped for a second and a half: the average is well over 40ms
kill 'STOP', @pids;
sleep(1.5);
kill 'CONT', @pids;
sleep(0.15);
is(outcomes(3, '/deep/lag', xff => '192.0.2.80', ua => bot('Lagbot')), '200 x1, 429 address-deep x2',
	'event loop late: the deep budget 6 becomes 1');
ok(wait_error_log($t, qr/budgets divided by 4 \(event loop late\)/),
	'event loop late: logged');
sleep(2);
is(outcomes(3, '/deep/lag2', xff => '192.0.2.81', ua => bot('Lagbot2')), '200 x3',
	'event loop on time again: the full budget');

# a location without budgets that redirects to one with them: counted there,
# on the path the client asked for (deep: /*/*/commits)
is(outcomes(7, '/redirect/x/commits', xff => '192.0.2.95', ua => bot('Hopbot')),
	'200 x6, 429 address-deep x1', 'after an internal redirect: counted, deep by the original path');

# bad input never gets a 500
is(outcome('/deep/x?' . ('%' x 3000), xff => '192.0.2.90', ua => bot('Badbot')), '200',
	'a broken percent-encoding in the query');

###############################################################################

sub sleep_until_fraction {
	my ($f) = @_;
	my $now = clock_gettime(CLOCK_MONOTONIC);
	my $frac = $now - int($now);
	sleep(($f - $frac) > 0 ? $f - $frac : 1 - $frac + $f);
}



###############################################################################
