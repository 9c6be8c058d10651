#!/usr/bin/perl

# API quotas across two nginx nodes sharing a store (a quota zone with
# sync=, as api_tiers renders it when crawl_budget.sync is set): an account
# alternating between the nodes, with its two keys, gets one quota within
# the documented error; the store holds one key per account, window and
# fixed window, each expiring with its window.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ port /;
use Crawlward::Test;
use Crawlward::Store qw/ zone_sync wait_zone_state /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $REDIS = $Crawlward::Store::SERVER;
plan(skip_all => "no $REDIS (ci/setup installs redis-server)") unless -x $REDIS;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req/)
	->plan(8);

my $dir = render($t, 't/policies/quota.yaml');
my $d = $t->testdir();
write_page($t);

my $store_port = port(8082);

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

    crawlward_budget_zone zone=cluster_quota:1m sync=valkey://127.0.0.1:$store_port/4 nodes=2 sync_interval=50ms sync_timeout=300ms;

    server {
        listen       127.0.0.1:$port;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        location /api/ {
            crawlward_quota zone=cluster_quota paths=/api/ keys=on default=standard;
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
	my $out = `redis-cli -h 127.0.0.1 -p $store_port -n 4 @_ 2>&1`;
	chomp $out;
	return $out;
}

sub sync_of { return zone_sync($_[0], 'quotas', 'cluster_quota'); }

sub wait_state { return wait_zone_state([ 8080, 8081 ], 'quotas', 'cluster_quota', @_); }

ok(wait_state('synced', 5), 'both nodes synced once the store answers');

# acme's 5 an hour, alternating nodes and keys; each request waits for its
# node's round trip, so that each node may be over by at most one request
my %seen;
my $rl;
for my $i (1 .. 12) {
	my $port = $i % 2 ? 8080 : 8081;
	my $key = $i % 3 ? 'acme-key-1' : 'acme-key-2';
	my $trips = sync_of($port)->{round_trips} // 0;
	my $r = get('/api/items', ua => 'curl/8.5.0', xff => "192.0.2.$i", port => $port,
		headers => [ "X-API-Key: $key" ]);
	$seen{ status($r) // 'none' }++;
	$rl = header($r, 'RateLimit') if $i == 12;
	my $deadline = time() + 3;
	sleep(0.01) while (sync_of($port)->{round_trips} // 0) < $trips + 2
		&& time() < $deadline;
}
my $passed = $seen{200} // 0;
cmp_ok($passed, '>=', 5, 'one quota across two nodes and two keys: at least its 5');
cmp_ok($passed, '<=', 7, "at most one request of each node over it ($passed passed)");
is($passed + ($seen{429} // 0), 12, 'the rest: 429');
like($rl // '', qr/^"hourly";r=0;/, 'RateLimit on node 2: nothing left, the cluster\'s count');

# the store: acme's hourly and daily windows, each expiring with its window
my $keys = store_cli('dbsize');
cmp_ok($keys, '<=', 2 * 2, "the store holds acme's windows ($keys keys), not one per key or node");
my $persist = `redis-cli -h 127.0.0.1 -p $store_port -n 4 eval "local n=0 for _,k in ipairs(redis.call('keys','*')) do if redis.call('pttl',k)<0 then n=n+1 end end return n" 0`;
chomp $persist;
is($persist, '0', 'every key in the store expires');
my $longest = `redis-cli -h 127.0.0.1 -p $store_port -n 4 eval "local m=0 for _,k in ipairs(redis.call('keys','*')) do local t=redis.call('pttl',k) if t>m then m=t end end return m" 0`;
chomp $longest;
cmp_ok($longest, '<=', 3 * 86_400_000, 'no key outlives two days and its window');

###############################################################################
