#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder tells the application each
# request's rung in a request header (classifier.rung_header, by default
# Crawlward-Rung), so that a rung whose challenge says `pass` reaches it by
# itself: proxy_pass passes the header on. Tried from the client's side: a
# client that sends its own Crawlward-Rung (once, twice, in another case,
# with underscores) never gets its value to the application; under
# crawlward_dry_run, as in observe mode, the application hears an empty value.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http proxy realip/)->plan(13);
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

        location /dry/ {
            crawlward_dry_run on;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
    }

    # the application: what it heard
    server {
        listen       127.0.0.1:%%PORT_8081%%;
        server_name  localhost;

        location / {
            return 200 "rung=[\$http_crawlward_rung] ignored=[\$http_crawlward_ignored]\\n";
        }
    }
}

EOF

$t->run();

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

# a client on a `pass` rung: the application hears it
my $r = page('/a', from => '10.2.0.1');
is(status($r), 200, 'L3 passes');
is(header($r, 'X-Rung'), 'L3', 'the client is on L3');
is(body($r), "rung=[L3] ignored=[]\n", 'the application hears L3');

# a verified crawler is L0, and the application hears so
$r = page('/a', from => '127.0.0.2', ua => $GOOGLEBOT);
is(body($r), "rung=[L0] ignored=[]\n", 'verified Googlebot: L0');

# what the client writes never reaches the application under the name
$r = page('/a', from => '10.2.0.2', headers => ['Crawlward-Rung: L0']);
is(body($r), "rung=[L3] ignored=[]\n", 'a client\'s own Crawlward-Rung: L0 is replaced');
$r = page('/a', from => '10.2.0.3', headers => ['cRAWLWARD-rUNG: L0']);
is(body($r), "rung=[L3] ignored=[]\n", 'in another case too');
$r = page('/a', from => '10.2.0.4', headers => ['Crawlward_Rung: L0']);
is(body($r), "rung=[L3] ignored=[]\n", 'with underscores too');
$r = page('/a', from => '10.2.0.5',
	headers => ['Crawlward-Rung: L0', 'Crawlward-Rung: L1']);
is(body($r), "rung=[L3] ignored=[]\n",
	'sent twice: one value, the ladder\'s; the second copy renamed and emptied');
like($r, qr/^X-Rung: L3\x0d?$/m, 'sent twice: still placed on L3');

# crawlward_dry_run, like observe mode, acts on no one: an empty value, and a
# client's copy emptied
$r = page('/dry/a', from => '10.2.0.6');
is(status($r), 200, 'dry run: 200');
is(body($r), "rung=[] ignored=[]\n", 'dry run: the application hears no rung');
$r = page('/dry/a', from => '10.2.0.7', headers => ['Crawlward-Rung: L0']);
is(body($r), "rung=[] ignored=[]\n", 'dry run: the client\'s copy emptied');

$t->stop();
unlike($t->read_file('error.log'), qr/\[(?:alert|emerg|crit)\]/,
	'no alert in the error log');

###############################################################################
