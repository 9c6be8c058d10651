#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder in observe mode
# (classifier.mode: observe, the default for a new policy) scores and places
# every client but acts on no one: the application hears no rung, and a
# client that sends its own Crawlward-Rung (once, twice, in another case, with
# `_` for `-`) still never gets its value to the application. The rung the
# ladder would give is in $crawlward_rung, for the log.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http proxy realip/)->plan(10);
$ENV{CRAWLWARD_BIN_Q} = quotemeta(crawlward_bin());

my $d = $t->testdir();
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-rung-observe
  throttle_log: /var/log/nginx/rung-observe-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
robots: {}
module: {}
classifier:
  mode: observe
  window: 1m
  zone_size: 32k
  # every client with any score at all is on L6, which would refuse it
  ladder: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006]
  cookie: {enabled: false}
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
    underscores_in_headers on;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Rung \$crawlward_rung always;

        location / {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
    }
}

EOF

$t->run_daemon(\&crawlward_headers_backend, port(8081));
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start backend on port " . port(8081) . "\n";

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

sub page {
	my ($path, %o) = @_;
	return get($path, ua => $o{ua} // $CHROME, xff => $o{from},
		headers => $o{headers} || []);
}

# placed on L6, which would refuse: observe mode lets it through, and the
# application hears no rung
my $r = page('/a', from => '10.3.0.1');
is(status($r), 200, 'L6 in observe mode: passed');
is(header($r, 'X-Rung'), 'L6', 'the rung it would get is in $crawlward_rung');
is(body($r), "none\n", 'the application hears no rung');

# verified Googlebot: L0, and still no header for the application
$r = page('/a', from => '127.0.0.2', ua => $GOOGLEBOT);
is(body($r), "none\n", 'verified Googlebot: no rung either');

# what the client writes never reaches the application
$r = page('/a', from => '10.3.0.2', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: \n", 'a client\'s own Crawlward-Rung: L0 is emptied');
$r = page('/a', from => '10.3.0.3', headers => ['cRAWLWARD-rUNG: L0']);
is(body($r), "Crawlward-Rung: \n", 'in another case too');
$r = page('/a', from => '10.3.0.4', headers => ['Crawlward_Rung: L0']);
is(body($r), "Crawlward-Rung: \n", 'with underscores too');
$r = page('/a', from => '10.3.0.5',
	headers => ['Crawlward-Rung: L0', 'crawlward-rung: L1']);
is(body($r), "Crawlward-Rung: \nCrawlward-Ignored: \n", 'sent twice: both emptied');

$t->stop();
unlike($t->read_file('error.log'), qr/\[(?:alert|emerg|crit)\]/,
	'no alert in the error log');
unlike($t->read_file('error.log'), qr/exited on signal/, 'no worker crashed');

###############################################################################
