#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder with two workers: each
# worker numbers the new clients it gives a session cookie, and no two
# clients get the same number, whichever worker served them. (The numbers
# once came from the standard library's random keys, which a worker inherits
# from the master: every worker counted the same numbers, so the first new
# client of each worker got the same cookie's client number, and two people
# were one client to the ladder.)

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(3);
$ENV{CRAWLWARD_BIN_Q} = quotemeta(crawlward_bin());

my $KEY = 'test-key-0123456789abcdef0123456789abcdef';
my $d = $t->testdir();
write_page($t);
$t->write_file('cookie.key', "$KEY\n");
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-ladder-workers
  throttle_log: /var/log/nginx/ladder-workers-throttled.log
robots: {}
module:
  status: /crawlward-status
classifier:
  mode: enforce
  window: 1m
  zone_size: 64k
  cookie:
    key_file: $d/cookie.key
    lifetime: 1h
  bucket: {burst: 1000, rate: 1000r/s}
  backstop: {burst: 1000, rate: 1000r/s}
EOF
my $dir = render($t, "$d/policy.yaml");

# two workers, and a listening socket each (reuseport): the kernel spreads
# the connections, each from its own port, over both
$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Worker \$pid always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

# forty new clients, each from its own address, a connection each
my (%by_worker, %numbers, @issued);
for my $i (1 .. 40) {
	my $r = get('/page', ua => "Mozilla/5.0 (X11; Linux x86_64) Firefox/$i.0",
		xff => "10.9.$i.1");
	my ($value) = (header($r, 'Set-Cookie') // '') =~ /^__Host-crawlward=([^.;]+)\./;
	next unless defined $value;
	push @issued, $value;
	$by_worker{ header($r, 'X-Worker') // '' }++;
	# the payload's first nine bytes, the version and the client number, are its
	# first twelve characters
	$numbers{ substr($value, 0, 12) }++;
}

is(scalar @issued, 40, 'every new client is given a cookie');
is(scalar(grep { $_ ne '' } keys %by_worker), 2, 'both workers served new clients')
	or diag(explain(\%by_worker));
is(scalar(keys %numbers), scalar @issued, 'no two clients have the same client number')
	or diag(explain([ grep { $numbers{$_} > 1 } keys %numbers ]));

###############################################################################
