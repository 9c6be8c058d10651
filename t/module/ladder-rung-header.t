#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder tells the application each
# request's rung in a request header (classifier.rung_header, by default
# Crawlward-Rung), so that a rung whose challenge says `pass` reaches it by
# itself: proxy_pass passes the header on, and a proxy_set_header of the same
# name replaces it. Tried from the client's side: a client that sends its own
# Crawlward-Rung (once, twice, in another case, with `_` or `.` for `-`, over
# HTTP/2) never gets its value to the application: not where the ladder sets
# the rung, not under crawlward_dry_run (as in observe mode), not where
# crawlward is off, and not at the error page of a refusal made before the
# ladder ran. The ladder's value is kept across try_files, and set in a
# location that enforces after a dry-run one; an HTTP/0.9 request, which has
# no header list, is answered without it and crashes nothing.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;
use Crawlward::Backend;
use Crawlward::HTTP2;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http http_v2 proxy realip/)->plan(23);
$ENV{CRAWLWARD_BIN_Q} = quotemeta(crawlward_bin());

my $d = $t->testdir();
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-rung
  throttle_log: /var/log/nginx/rung-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
robots: {}
block_status: 403
# an HTTP/0.9 request has no User-Agent: let it reach the ladder
actions: {empty: allow}
module: {}
classifier:
  mode: enforce
  window: 1m
  zone_size: 32k
  # every client with any score at all is on L3, whose challenge passes
  ladder: [0.001, 0.002, 0.003, 0.99, 0.995, 0.999]
  challenges: {L3: pass}
  cookie: {enabled: false}
EOF
my $dir = render($t, "$d/policy.yaml");

# nginx 1.25.1 has "http2 on;"; before it, "listen ... http2"
my ($listen_h2, $http2_on) = $t->has_version('1.25.1')
	? ('', 'http2 on;') : (' http2', '');

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;
    underscores_in_headers on;
    ignore_invalid_headers off;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Rung \$crawlward_rung always;
        error_page 403 = \@application;

        location / {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /dry/ {
            crawlward_dry_run on;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /off/ {
            crawlward off;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /redirect/ {
            try_files /nonexistent \@application;
        }

        location /dry-then/ {
            crawlward_dry_run on;
            try_files /nonexistent \@application;
        }

        location /set/ {
            proxy_set_header Crawlward-Rung from-nginx;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location \@application {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
    }

    # HTTP/2: header names in lower case, from the HPACK block
    server {
        listen       127.0.0.1:%%PORT_8082%%$listen_h2;
        server_name  localhost;
        $http2_on

        include $dir/crawlward-server.conf;

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
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; '
	. 'GPTBot/1.2; +https://openai.com/gptbot)';

sub page {
	my ($path, %o) = @_;
	return get($path, ua => $o{ua} // $CHROME, xff => $o{from},
		headers => $o{headers} || []);
}

# a client on a `pass` rung: the application hears it
my $r = page('/a', from => '10.2.0.1');
is(status($r), 200, 'L3 passes');
is(header($r, 'X-Rung'), 'L3', 'the client is on L3');
is(body($r), "Crawlward-Rung: L3\n", 'the application hears L3');

# a verified crawler is L0, and the application hears so
$r = page('/a', from => '127.0.0.2', ua => $GOOGLEBOT);
is(body($r), "Crawlward-Rung: L0\n", 'verified Googlebot: L0');

# what the client writes never reaches the application
$r = page('/a', from => '10.2.0.2', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: L3\n", 'a client\'s own Crawlward-Rung: L0 is replaced');
$r = page('/a', from => '10.2.0.3', headers => ['cRAWLWARD-rUNG: L0']);
is(body($r), "Crawlward-Rung: L3\n", 'in another case too');
$r = page('/a', from => '10.2.0.4', headers => ['Crawlward_Rung: L0']);
is(body($r), "Crawlward-Rung: L3\n", 'with underscores too');
$r = page('/a', from => '10.2.0.5', headers => ['Crawlward.Rung: L0']);
is(body($r), "Crawlward-Rung: L3\n", 'with a dot too (PHP reads it as _)');
$r = page('/a', from => '10.2.0.6',
	headers => ['Crawlward-Rung: x', 'Crawlward.Rung: L0']);
is(body($r), "Crawlward-Rung: L3\nCrawlward-Ignored: \n",
	'sent twice: one value, the ladder\'s; the second copy renamed and emptied');
like($r, qr/^X-Rung: L3\x0d?$/m, 'sent twice: still placed on L3');

# crawlward_dry_run, like observe mode, acts on no one: no rung, and a client's
# copy emptied
$r = page('/dry/a', from => '10.2.0.7');
is(body($r), "none\n", 'dry run: the application hears no rung');
$r = page('/dry/a', from => '10.2.0.8', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: \n", 'dry run: the client\'s copy emptied');

# where crawlward is off, and at the error page of a refusal made before the
# ladder ran, the client's copy is emptied all the same
$r = page('/off/a', from => '10.2.0.9', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: \n", 'crawlward off: the client\'s copy emptied');
$r = page('/a', from => '10.2.0.10', ua => $GPTBOT,
	headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: \n",
	'the bot-blocker\'s 403 at the application: the client\'s copy emptied');

# placed, then on to another location: the ladder's value is kept; placed
# under crawlward_dry_run, then on to a location that enforces: it is set there
$r = page('/redirect/a', from => '10.2.0.12', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: L3\n", 'try_files to a named location: the ladder\'s value kept');
$r = page('/dry-then/a', from => '10.2.0.13', headers => ['Crawlward-Rung: L0']);
is(body($r), "Crawlward-Rung: L3\n",
	'placed under dry run, then in a location that enforces: the rung set there');

# an HTTP/0.9 request has no header list for the rung to go into: the worker
# answers it, and the next request
$r = http("GET /a\x0d\x0a");
is($r, "none\n", 'HTTP/0.9: answered, with no rung');
$r = page('/a', from => '10.2.0.14');
is(body($r), "Crawlward-Rung: L3\n", 'after HTTP/0.9: the next request answered');

# over HTTP/2, the client's lower-case copy is replaced the same way
my $h2 = Crawlward::HTTP2->new(port(8082));
my $sid = $h2->request('/a', 'user-agent' => $CHROME,
	'x-forwarded-for' => '10.2.0.15', 'crawlward-rung' => 'L0');
my %got = $h2->collect([$sid], 5);
is($got{$sid}{body}, "Crawlward-Rung: L3\n", 'HTTP/2: the client\'s crawlward-rung: L0 is replaced');
$h2->close();

# a proxy_set_header of the same name replaces the ladder's value: one header
$r = page('/set/a', from => '10.2.0.11');
is(body($r), "Crawlward-Rung: from-nginx\n",
	'proxy_set_header Crawlward-Rung: its value, and no second header');

$t->stop();
unlike($t->read_file('error.log'), qr/\[(?:alert|emerg|crit)\]/,
	'no alert in the error log');
is(scalar(() = $t->read_file('error.log') =~ /\[warn\]/g), 0,
	'no warning in the error log');
unlike($t->read_file('error.log'), qr/exited on signal/, 'no worker crashed');

###############################################################################
