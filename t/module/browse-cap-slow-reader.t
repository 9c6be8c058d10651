#!/usr/bin/perl

# The module's browse cap (crawlward_browse_cap) and clients that read
# slowly: a place is given back once the response's last buffer is handed
# to nginx's output (with proxy buffering, the upstream is done), not when
# the client has read it all. A few slow readers from one address cannot
# hold every place while the application is idle. A place given back early
# is not given back again when the request ends.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ port /;
use Crawlward::Test;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http proxy ssi/)->plan(12);
my $d = $t->testdir();
my ($files_port, $held_port) = (port(8081), port(8083));

$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  same_site_hosts: [example.org]
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-slow-reader
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
browse_shed:
  locations: [/browse]
  facet_names: [subjects]
  max_in_flight: 1
  retry_after: 30
robots: {}
crawl_budget: {}
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");

# 16 MB: more than the socket's buffers and proxy_buffers hold, so nginx
# keeps the rest in a temporary file while the client does not read
mkdir "$d/files";
open my $big, '>', "$d/files/big" or die "$d/files/big: $!";
print $big 'x' x (1 << 20) for 1 .. 16;
close $big;
$t->write_file('files/small', "small\n");
$t->write_file('files/page.html', qq{before <!--# include virtual="/inner/" --> after\n});

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

        crawlward on;

        location /browse/held {
            crawlward_browse_cap zone=crawlward_budget max=1;
            proxy_pass http://127.0.0.1:$held_port;
        }

        location /browse/ {
            crawlward_browse_cap zone=crawlward_budget max=1;
            proxy_pass http://127.0.0.1:$files_port/;
        }

        # a page whose include the application answers after the page itself
        location /browse/ssi {
            crawlward_browse_cap zone=crawlward_budget max=1;
            ssi on;
            proxy_pass http://127.0.0.1:$files_port/page.html;
        }

        location /inner/ {
            proxy_pass http://127.0.0.1:$held_port/browse-inner/;
        }

        location = /crawlward-status {
            crawlward off;
            crawlward_status;
        }
    }

    server {
        listen       127.0.0.1:$files_port;
        server_name  files;

        location / {
            root $d/files;
        }
    }
}

EOF

$t->run_daemon(\&held_backend, $held_port, $d, 20);
$t->run();
$t->waitforsocket("127.0.0.1:$held_port")
	or die "the backend did not start\n";

###############################################################################

# a client that asks for the big page and reads nothing
my $slow = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . port(8080)) or die "connect: $!";
$slow->autoflush(1);
print $slow "GET /browse/big HTTP/1.0\r\nHost: localhost\r\nUser-Agent: " . BROWSER . "\r\n\r\n";

ok(wait_for(sub { browse_in_flight() == 0 }, 10), 'a slow reader whose upstream is done holds no place');
is(status(get('/browse/small', ua => BROWSER)), 200, 'so the next browse page is answered');

# the slow reader has its answer still to read
my $first = '';
sysread($slow, $first, 15);
is($first, 'HTTP/1.1 200 OK', 'the slow reader is still being answered');

# a request the upstream still works on holds the place
my $held = get('/browse/held', ua => BROWSER, start => 1);
is(wait_backend($d, qr!/browse/held!, 1, 5), 1, 'a request held by its upstream');
is(browse_in_flight(), 1, 'holds the place');
is(status(get('/browse/small', ua => BROWSER)), 503, 'past the cap: 503');

# the slow reader leaves: its place was given back already, not again
close $slow;
sleep(0.3);
is(browse_in_flight(), 1, 'the slow reader leaving gives nothing back twice');
is(status(get('/browse/small', ua => BROWSER)), 503, 'the cap still holds');

$t->write_file('release', '');
ok(wait_for(sub { browse_in_flight() == 0 }, 5), 'the held request ends: its place is back');

# a page's own upstream is done, but its SSI include is still being answered:
# the place is held until the request ends
unlink "$d/release";
my $ssi = get('/browse/ssi', ua => BROWSER, start => 1);
is(wait_backend($d, qr!/browse-inner/!, 1, 5), 1, 'an SSI include in flight');
is(browse_in_flight(), 1, 'the page with an include in flight holds its place');
$t->write_file('release', '');
ok(wait_for(sub { browse_in_flight() == 0 }, 5), 'the include answered: the place is back');

###############################################################################
