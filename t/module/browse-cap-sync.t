#!/usr/bin/perl

# The browse cap across two nginx nodes (crawl_budget.sync.browse_cap, the
# module's crawlward_browse_cap): requests in flight on one node take places
# on the other; past the cluster's cap, 503 with Retry-After at once, on
# either node; a verified crawler takes no place; the places come back when
# the requests end; without the store, each node its share of the cap.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ port http_end /;
use Crawlward::Test;
use Crawlward::Store;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $REDIS = $Crawlward::Store::SERVER;
plan(skip_all => "no $REDIS (ci/setup installs redis-server)") unless -x $REDIS;

my $t = Test::Nginx->new()->has(qw/http proxy realip/)->plan(25);
my $d = $t->testdir();
my ($store_port, $backend_port) = (port(8082), port(8083));

# the policy, with this run's store
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  same_site_hosts: [example.org]
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-browse-sync
  throttle_log: /var/log/nginx/browse-sync-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
browse_shed:
  locations: [/browse]
  facet_names: [subjects]
  max_in_flight: 4
  retry_after: 30
robots: {}
crawl_budget:
  sync:
    store: valkey://127.0.0.1:$store_port
    nodes: 2
    interval: 50ms
    timeout: 300ms
    browse_cap: true
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");
like($t->read_file("etc/nginx/crawlward-browse-sync/crawlward-limits.conf"),
	qr/^crawlward_browse_cap zone=crawlward_budget max=4;$/m, 'rendered: the module\'s browse cap');

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

    server {
        listen       127.0.0.1:$port;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location /browse {
            proxy_pass http://127.0.0.1:$backend_port;
        }
    }
}
EOF
}

$t->write_file_expand('nginx.conf', "%%TEST_GLOBALS%%\n" . node_conf(port(8080)));

my $store = Crawlward::Store->new($d, $store_port);
$t->run_daemon(\&held_backend, $backend_port, $d, 20);
$t->run();
start_node($t, 'node2', node_conf(port(8081)), port(8081));
$t->waitforsocket("127.0.0.1:$backend_port")
	or die "the backend did not start\n";

###############################################################################

# a node's browse cap and sync, as its status says
sub zone_of {
	my ($port) = @_;
	my $st = module_status('/crawlward-status', port => $port) or return {};
	my ($z) = @{ $st->{budgets} || [] };
	return $z || {};
}

sub synced {
	return (zone_of(8080)->{sync}{state} // '') eq $_[0]
		&& (zone_of(8081)->{sync}{state} // '') eq $_[0];
}

sub others { return zone_of($_[0])->{browse_cap}{others_in_flight} // -1; }

sub hold {
	my ($port, $page) = @_;
	return get("/browse?page=$page", ua => BROWSER, port => $port, start => 1);
}

###############################################################################

ok(wait_for(sub { synced('synced') }, 5), 'both nodes synced');

# 3 in flight on node 1: node 2 learns it
my @held = map { hold(8080, $_) } 1 .. 3;
is(wait_backend($d, qr/browse/, 3, 5), 3, '3 browse requests in flight on node 1');
ok(wait_for(sub { others(8081) == 3 }, 2), 'node 2 counts them');
push @held, hold(8081, 4);
is(wait_backend($d, qr/browse/, 4, 5), 4, 'the fourth on node 2 reaches the site');
ok(wait_for(sub { others(8080) == 1 }, 2), 'node 1 counts it');

# the cluster's cap of 4 is taken: 503 at once, on either node
for my $port (8081, 8080) {
	my $start = time();
	my $r = get('/browse?page=99', ua => BROWSER, port => $port);
	is(status($r), 503, "node " . ($port - 8079) . ": past the cluster's cap, 503");
	is(header($r, 'Retry-After'), '30', "node " . ($port - 8079) . ": Retry-After");
	cmp_ok(time() - $start, '<', 1, "node " . ($port - 8079) . ": at once");
}
is(wait_backend($d, qr/browse/, 5, 0.3), 4, 'the refused requests never reached the site');

# a verified crawler takes no place and gets no 503 (Google's crawler documentation)
push @held, get('/browse?page=g', ua => 'Mozilla/5.0 (compatible; Googlebot/2.1)',
	from => '127.0.0.2', port => 8081, start => 1);
is(wait_backend($d, qr/browse/, 5, 5), 5, 'verified Googlebot past the full cap reaches the site');
is(outcome('/robots.txt', port => 8080), '200', 'robots.txt meanwhile');

# they end: the places come back on both nodes
$t->write_file('release', '');
my @bodies = map { body(http_end($_)) // '' } @held;
is(scalar(grep { /^backend: \/browse\?page=/ } @bodies), 5, 'every held request answered by the site');
ok(wait_for(sub { (zone_of(8080)->{browse_cap}{in_flight} // -1) == 0
	&& (zone_of(8081)->{browse_cap}{in_flight} // -1) == 0 }, 2), 'no place held on either node');
ok(wait_for(sub { others(8080) == 0 && others(8081) == 0 }, 2), 'and both know it');
is(status(get('/browse?page=100', ua => BROWSER, port => 8081)), 200, 'browse pages answer again');

# without the store: each node its share of the cap, 2 of 4
unlink("$d/release");
$store->stop();
ok(wait_for(sub { synced('fallback') }, 3), 'both nodes in fallback');
@held = map { hold(8080, 200 + $_) } 1 .. 2;
is(wait_backend($d, qr/page=20[12]/, 2, 5), 2, 'node 1: 2 in flight');
is(status(get('/browse?page=299', ua => BROWSER, port => 8080)), 503, 'node 1: past its share, 503');
push @held, hold(8081, 203);
is(wait_backend($d, qr/page=203/, 1, 5), 1, 'node 2: its own share');
$t->write_file('release', '');
http_end($_) for @held;

# the throttle log keeps the cap's 503s as the browse cap's, from both nodes
my @throttled = grep { /refusal=browse-cap/ }
	split /\n/, $t->read_file('var/log/nginx/browse-sync-throttled.log') // '';
is(scalar(@throttled), 3, 'the throttle log: the three 503s, refused by the browse cap');

is(scalar(grep { /\[(alert|emerg)\]/ } split /\n/, $t->read_file('node2-error.log') // ''), 0,
	'node 2: no alerts');

###############################################################################
