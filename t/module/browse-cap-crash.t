#!/usr/bin/perl

# The browse cap when a worker dies holding places (the module's
# crawlward_browse_cap): the worker nginx starts in its place gives them
# back, so the cap does not stay taken until the zone is made again.

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

my $t = Test::Nginx->new()->has(qw/http proxy realip/)->plan(6);
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
  dir: /etc/nginx/crawlward-browse-crash
  throttle_log: /var/log/nginx/browse-crash-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
browse_shed:
  locations: [/browse]
  facet_names: [subjects]
  max_in_flight: 2
  retry_after: 30
robots: {}
crawl_budget:
  sync:
    store: valkey://127.0.0.1:$store_port
    nodes: 1
    interval: 50ms
    timeout: 300ms
    browse_cap: true
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 1;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location /browse {
            proxy_pass http://127.0.0.1:$backend_port;
        }
    }
}

EOF

# the worker is killed on purpose: nginx logs its death as an alert
$t->todo_alerts();

my $store = Crawlward::Store->new($d, $store_port);
$t->run_daemon(\&held_backend, $backend_port, $d, 20);
$t->run();
$t->waitforsocket("127.0.0.1:$backend_port")
	or die "the backend did not start\n";

###############################################################################

sub workers {
	my ($master) = @_;
	return grep { /^\d+$/ } split /\s+/, `pgrep -P $master`;
}

###############################################################################

my @held = map { get("/browse?page=$_", ua => BROWSER, start => 1) } 1 .. 2;
is(wait_backend($d, qr/browse/, 2, 5), 2, 'the cap of 2 taken by requests in flight');
is(status(get('/browse?page=9', ua => BROWSER)), 503, 'past the cap, 503');

# the worker dies (a crash) with the two places taken
my $master = $t->read_file('nginx.pid');
chomp $master;
my @before = workers($master);
kill 'KILL', @before;
ok(wait_for(sub { my @now = workers($master); @now == 1 && $now[0] != $before[0] }, 5),
	'nginx starts a worker again');
ok(wait_for(sub { browse_in_flight() == 0 }, 3), 'the new worker gave the dead one\'s places back');

$t->write_file('release', '');
is(status(get('/browse?page=10', ua => BROWSER)), 200, 'browse pages answer again');
like($t->read_file('error.log'),
	qr/crawlward: budget zone "crawlward_budget": gave back 2 browse-cap places a worker that exited in this slot held/,
	'the error log says so');

$store->stop();

###############################################################################
