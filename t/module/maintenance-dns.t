#!/usr/bin/perl

# Maintenance's 503 carries its Retry-After whoever asks, a claimed crawler
# whose DNS check has not answered included: the rendered server block
# answers 503 in the rewrite phase, before the preaccess phase ever settles
# the check, and the answer reads no verdict. (It lost its Retry-After and
# its refusal, `$crawlward_refusal` empty, for every claim of an agent
# checked by DNS, bingbot's in the shipped catalogue, while maintenance
# lasted: nothing filled the verdict cache meanwhile.)

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn rewrite/)->plan(6);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-maintenance-dns
  throttle_log: /var/log/nginx/maintenance-dns-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
maintenance:
  flag_file: /var/www/site/down
  retry_after: 120
robots: {}
module:
  zone_size: 4m
  dns:
    resolver_timeout: 1s
    zone_size: 32k
EOF
my $dir = render($t, "$d/policy.yaml");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    # nothing answers there: a check, once started, would wait
    resolver 127.0.0.1:%%PORT_8053_UDP%%;

    include $dir/crawlward-http.conf;

    log_format refusal '\$status \$crawlward_refusal [\$crawlward_dns]';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/refusal.log refusal;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

# the flag file, where the test's render put it
my $flag = flag_file($t);
open my $fh, '>', $flag or die "$flag: $!\n";
close $fh;
$t->run();

###############################################################################

# Googlebot claimed from outside its range: a DNS check, never settled
my $r = get('/record/1', ua => $GOOGLEBOT, xff => '192.0.2.50');
is(status($r), 503, 'maintenance: a claimed Googlebot awaiting DNS gets 503');
is(header($r, 'Retry-After'), '120', 'with the maintenance Retry-After');
$r = get('/record/1', ua => BROWSER, xff => '192.0.2.51');
is(status($r), 503, 'a browser: 503');
is(header($r, 'Retry-After'), '120', 'with the same Retry-After');

wait_file_lines("$d/refusal.log", 2);
my @log = file_lines("$d/refusal.log");
is($log[0], '503 maintenance []', 'logged: refused by maintenance, no DNS answer yet');
is(status(get('/robots.txt', ua => $GOOGLEBOT, xff => '192.0.2.50')), 200, 'robots.txt: 200');

###############################################################################
