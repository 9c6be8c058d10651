#!/usr/bin/perl

# Two nginx nodes sharing one crawl budget through redis-server
# (crawlward_budget_zone sync=): a crawler alternating between the nodes gets
# one budget within the documented error; stopping the store switches both
# nodes to their share of the budgets (status endpoint, Prometheus and one
# error log line each), with no 500 and nothing hung, and they return to the
# cluster's budgets when it is back; in fallback robots.txt and a verified
# crawler still pass; every key in the store expires with its window.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ port /;
use Crawlward::Test;
use Crawlward::Store qw/ zone_sync wait_zone_state wait_zone_owner /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $REDIS = $Crawlward::Store::SERVER;
plan(skip_all => "no $REDIS (ci/setup installs redis-server)") unless -x $REDIS;

my $BOT = SELF_DECLARED_BOT;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn limit_req/)
	->plan(47);

my $dir = render($t, 't/policies/budget.yaml');
my $d = $t->testdir();
write_page($t);

my $store_port = port(8082);

# both nodes: the same rendered policy and budgets, each its own nginx
sub node_conf {
	my ($port) = @_;
	return <<"EOF";
daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    crawlward_budget_zone zone=cluster:1m sync=valkey://127.0.0.1:$store_port/3 nodes=2 sync_interval=50ms sync_timeout=300ms;

    server {
        listen       127.0.0.1:$port;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Budget "\$crawlward_budget" always;

        location / {
            crawlward_budget zone=cluster address=60r/m,6r/m agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }
    }
}
EOF
}

$t->write_file_expand('nginx.conf', "%%TEST_GLOBALS%%\n" . node_conf(port(8080)));

my $store = Crawlward::Store->new($d, $store_port);
$t->run();
start_node($t, 'node2', node_conf(port(8081)), port(8081));

###############################################################################

sub store_cli {
	my $out = `redis-cli -h 127.0.0.1 -p $store_port -n 3 @_ 2>&1`;
	chomp $out;
	return $out;
}

sub sync_of { return zone_sync($_[0], 'budgets', 'cluster'); }

sub wait_state { return wait_zone_state([ 8080, 8081 ], 'budgets', 'cluster', @_); }

sub wait_owner { return wait_zone_owner($_[0], 'budgets', 'cluster', @_[1 .. $#_]); }

# $n deep requests from $xff, alternating between the nodes; with $settle,
# after each request until the node that answered it has completed a round
# trip begun after it (so that the error is the bound's, one request a node,
# however slow a loaded machine makes the workers), else $gap apart: the
# outcomes counted, and the slowest answer
sub alternate {
	my ($n, $xff, $settle, $gap) = @_;
	my (%seen, $slowest);
	$slowest = 0;
	for my $i (1 .. $n) {
		my $port = $i % 2 ? 8080 : 8081;
		my $trips = sync_of($port)->{round_trips} // 0;
		my $start = time();
		$seen{ outcome('/deep/x', xff => $xff, port => $port) }++;
		my $took = time() - $start;
		$slowest = $took if $took > $slowest;
		if ($settle) {
			# this node sends its count, then the other, which the next
			# request goes to, learns it (on a loaded machine a round trip
			# can come late)
			my $deadline = time() + 3;
			sleep(0.01) while (sync_of($port)->{round_trips} // 0) < $trips + 2
				&& time() < $deadline;
			my $other = $port == 8080 ? 8081 : 8080;
			my $other_trips = sync_of($other)->{round_trips} // 0;
			sleep(0.01) while (sync_of($other)->{round_trips} // 0) < $other_trips + 2
				&& time() < $deadline + 3;
		} else {
			sleep($gap);
		}
	}
	return (join(', ', map { "$_ x$seen{$_}" } sort keys %seen), \%seen, $slowest);
}

# $n deep requests from $xff through one node, each waiting for its round trip
sub alternate_on {
	my ($port, $n, $xff) = @_;
	my %seen;
	for (1 .. $n) {
		my $trips = sync_of($port)->{round_trips} // 0;
		$seen{ outcome('/deep/x', xff => $xff, port => $port) }++;
		my $deadline = time() + 3;
		sleep(0.01) while (sync_of($port)->{round_trips} // 0) < $trips + 2
			&& time() < $deadline;
	}
	return join(', ', map { "$_ x$seen{$_}" } sort keys %seen);
}

###############################################################################

ok(wait_state('synced', 5), 'both nodes synced once the store answers');

# one budget of 6 deep requests a minute for the address across both nodes; each
# node may go over by what it let through before its next round trip (here one
# request each: each request waits for its node's round trip)
my ($out, $seen, $slowest) = alternate(16, '192.0.2.1', 1);
my $passed = $seen->{200} // 0;
cmp_ok($passed, '>=', 6, "the address's budget across two nodes: $out");
cmp_ok($passed, '<=', 8, 'at most one interval of each node over the budget');
is($passed + ($seen->{'429 address-deep'} // 0), 16, 'the rest: 429 by the address budget');

# the same without sync would be 6 on each node: 12
cmp_ok(store_cli('dbsize'), '<=', 2 * 2 * 3,
	'keys per budget key, window kind and fixed window, not per request');
my $s1 = sync_of(8080);
cmp_ok($s1->{round_trips}, '>', 10, 'round trips counted');
cmp_ok($s1->{commands}, '>=', $s1->{round_trips}, 'commands counted');
is($s1->{nodes}, 2, 'status: the nodes');
like($s1->{store}, qr!^valkey://127\.0\.0\.1:\d+/3$!, 'status: the store');
is(`redis-cli -h 127.0.0.1 -p $store_port -n 0 dbsize` + 0, 0, 'the keys are in database 3, none in 0');

# every key expires with its window: a minute's window lives two minutes
like(store_cli('--scan', '--pattern', "'crawlward:cluster:*'"), qr/^crawlward:cluster:/m,
	'keys named by zone');
my ($no_ttl, $max_ttl) = split /\n/, store_cli('eval',
	q{"local n,m=0,0 for _,k in ipairs(redis.call('keys','*')) do local t=redis.call('pttl',k) if t<0 then n=n+1 end if t>m then m=t end end return {n,m}"}, 0);
is($no_ttl, 0, 'every key in the store has an expiry');
cmp_ok($max_ttl, '<=', 121_000, 'none past the end of the next window');

# the store stops: both nodes fall back to their share (6 / 2 = 3 deep a minute)
$store->stop();
ok(wait_state('fallback', 3), 'both nodes in fallback once the store is gone');
($out, $seen, $slowest) = alternate(10, '192.0.2.2', 0, 0.05);
is($out, '200 x6, 429 address-deep x4', "each node its share of the budget: $out");
cmp_ok($slowest, '<', 1, 'no request waits for the store');
is(outcomes(4, '/robots.txt', port => 8081), '200 x4', 'robots.txt in fallback');
is(outcomes(8, '/deep/x', ua => 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)', xff => '127.0.0.2', port => 8080),
	'200 x8', 'a verified crawler is not counted in fallback either');

my $prom = get('/crawlward-status?format=prometheus', ua => undef, port => 8081);
like(body($prom), qr/^crawlward_budget_sync_synced\{zone="cluster"\} 0$/m, 'Prometheus: in fallback');
like(body($prom), qr/^crawlward_budget_sync_fallbacks_total\{zone="cluster"\} [1-9]/m,
	'Prometheus: fallbacks counted');

# a few reconnection attempts later, still one line per node
sleep(1.5);
my $down = qr/crawlward_budget_zone "cluster": the store valkey:\S+ does not answer \(.*\): each node keeps its own budgets divided by 2 until it does/;
is(scalar(error_log_lines($t, $down)), 1, 'node 1 logs the outage once');
is(scalar(node2_log($down)), 1, 'node 2 logs the outage once');
unlike(join("\n", error_log_lines($t), node2_log()), qr/connect\(\) to \S+ failed/,
	'no error line per reconnection attempt');

# it returns: both nodes back to the cluster's budgets
$store->start();
ok(wait_state('synced', 7), 'both nodes synced again when the store returns');
my $up = qr/crawlward_budget_zone "cluster": the store valkey:\S+ answers: the budgets are the cluster's again/;
ok(scalar(wait_error_log($t, $up, 1)), 'node 1 logs the return');
ok(scalar(node2_log($up)), 'node 2 logs the return');
($out, $seen) = alternate(16, '192.0.2.3', 1);
$passed = $seen->{200} // 0;
cmp_ok($passed, '>=', 6, "one budget again: $out");
cmp_ok($passed, '<=', 8, 'within the error again');

# one worker of a node syncs for it; a reload hands the sync to a new worker at
# once, and one that exits hands it over within its claim (3 intervals and the
# timeout)
my $owner = sync_of(8080)->{owner_pid} // 0;
ok((grep { $_ == $owner } worker_pids($t)), 'a worker of node 1 owns its sync');
ok(reload_workers($t), 'node 1 reloaded');
my %new = map { $_ => 1 } worker_pids($t);
ok(wait_owner(8080, sub { $new{ $_[0] } }, 3), 'a new worker owns the sync after the reload');
my $trips = sync_of(8080)->{round_trips} // 0;
sleep(0.5);
cmp_ok(sync_of(8080)->{round_trips} // 0, '>', $trips, 'and syncs');
$owner = sync_of(8080)->{owner_pid};
kill 'TERM', $owner;
ok(wait_owner(8080, sub { $_[0] != $owner }, 3), 'another worker takes over from one that exited');
$trips = sync_of(8080)->{round_trips} // 0;
sleep(0.5);
cmp_ok(sync_of(8080)->{round_trips} // 0, '>', $trips, 'and syncs');
is(sync_of(8080)->{state}, 'synced', 'synced throughout');

# an attacker rotating addresses makes keys that expire with their windows, and
# cannot make the sync refuse robots.txt or a verified crawler
for my $i (1 .. 100) {
	get('/deep/x', ua => "Mozilla/5.0 (compatible; Rot${i}bot/1.0)", xff => "203.0.113.$i",
		port => 8080 + $i % 2);
}
($no_ttl) = split /\n/, store_cli('eval',
	q{"local n=0 for _,k in ipairs(redis.call('keys','*')) do if redis.call('pttl',k)<0 then n=n+1 end end return {n}"}, 0);
is($no_ttl, 0, 'after a rotation: every key still expires');
cmp_ok(store_cli('dbsize'), '<=', 2 * 2 * (3 + 100 + 1 + 100 + 1),
	'keys: at most one per budget key, window kind and fixed window (two of them)');
is(outcome('/robots.txt', port => 8080), '200', 'robots.txt after the rotation');

# a store that loses its keys (restarted, flushed): the nodes send their counts
# of the window again, so the budget stays the cluster's; before, each node kept
# the others' count from before the loss and never learnt what the store lost.
# The scenario starts early in a fixed window (6r/m: the wall clock's minute): a
# loss just before a window ends takes the previous window's count with it, and
# each node then knows only its own share of that window (documented)
sleep(0.2) while time() % 60 > 40;
my ($three) = alternate_on(8080, 3, '192.0.2.20');
is($three, '200 x3', 'three deep requests through node 1');
is(store_cli('flushdb'), 'OK', 'the store loses every key');
($out, $seen) = alternate(12, '192.0.2.20', 1);
$passed = 3 + ($seen->{200} // 0);
cmp_ok($passed, '<=', 8, "after the loss, still one budget within the error: $out");

# a store that hangs (stopped, its connections open): the round trip times out,
# the nodes fall back, and no request waits for it; it comes back
kill 'STOP', $store->pid;
ok(wait_state('fallback', 5), 'a store that hangs: fallback');
ok(scalar(wait_error_log($t, qr/does not answer \(no reply within sync_timeout\)/, 1, 5)),
	'the error log says the store did not answer in time');
my $start = time();
is(outcome('/deep/x', xff => '192.0.2.9', port => 8081), '200', 'a request meanwhile');
cmp_ok(time() - $start, '<', 1, 'without waiting for the store');
kill 'CONT', $store->pid;
ok(wait_state('synced', 7), 'synced again when it answers');

is(scalar(node2_log(qr/\[(alert|emerg)\]/)), 0, 'node 2: no alerts');

# (named subs use $d, not $t: a sub holding $t would keep it alive past
# Test::More's count of the tests, and its DESTROY's tests with it)
sub node2_log {
	my ($re) = @_;
	open(my $fh, '<', "$d/node2-error.log") or return ();
	my @lines = map { chomp; $_ } <$fh>;
	return defined $re ? grep { $_ =~ $re } @lines : @lines;
}

###############################################################################
