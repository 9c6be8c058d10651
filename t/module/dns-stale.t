#!/usr/bin/perl

# ngx_http_crawlward_module: a DNS outage does not make the crawlers that
# forward-confirmed reverse DNS verified unverified. Once a verified verdict
# expires and the lookup that would renew it fails (SERVFAIL, a timeout), it
# holds on for stale_verified, one unresolved TTL at a time; after that, or
# when DNS answers that the address is not the crawler's, it does not. An
# address DNS never verified gets nothing from it.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ sleep time /;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;
use Crawlward::DNS qw/ reverse_name write_records /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(13);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<'EOF');
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-dns-stale
  throttle_log: /var/log/nginx/dns-stale-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
actions:
  spoofed: block-403
robots: {}
module:
  status: /crawlward-status
  dns:
    resolver_timeout: 1s
    zone_size: 32k
    valid_verified: 1s
    valid_spoofed: 1s
    valid_unresolved: 1s
    stale_verified: 10s
EOF
my $dir = render($t, "$d/policy.yaml");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    resolver 127.0.0.1:%%PORT_8053_UDP%% valid=1s;

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;

            add_header X-DNS "\$crawlward_verdict|\$crawlward_action|\$crawlward_dns|\$crawlward_dns_cache" always;
        }
    }
}

EOF

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

sub ptr { return reverse_name($_[0]); }

my %records = (
	ptr('192.0.2.1') => { PTR => 'crawl-192-0-2-1.googlebot.com' },
	'crawl-192-0-2-1.googlebot.com' => { A => '192.0.2.1' },
	ptr('192.0.2.2') => { PTR => 'crawl-192-0-2-2.googlebot.com' },
	'crawl-192-0-2-2.googlebot.com' => { A => '192.0.2.2' },
);
my $file = "$d/dns.records";
write_records($file, \%records);
Crawlward::DNS->start($t, port => port(8053, udp => 1), records_file => $file);

$t->run();

###############################################################################

sub claim {
	my ($addr) = @_;
	my $r = get('/page', ua => $GOOGLEBOT, xff => $addr);
	return (status($r) // 'none') . ' ' . (header($r, 'X-DNS') // '(none)');
}

my $t0 = time();
is(claim('192.0.2.1'), '200 verified|allow|verified|miss', 'verified by DNS');
is(claim('192.0.2.1'), '200 verified|allow|verified|hit', 'within its second: a hit');
is(claim('192.0.2.2'), '200 verified|allow|verified|miss', 'another crawler address, verified by DNS');

# the outage: every reverse lookup fails; and a third address, never verified
write_records($file, { %records, ptr('192.0.2.1') => { servfail => 1 },
	ptr('192.0.2.2') => { servfail => 1 }, ptr('192.0.2.3') => { servfail => 1 } });
# nginx's resolver keeps an answer for valid=1s in whole seconds: up to 2 s
sleep 3.1;

is(claim('192.0.2.1'), '200 verified|allow|verified|stale', 'its verdict expired, DNS fails: still verified (stale)');
is(claim('192.0.2.1'), '200 verified|allow|verified|hit', 'and the other requests read it so');
is(claim('192.0.2.3'), '200 unverified|allow|unresolved|miss', 'an address DNS never verified: unresolved, unverified');
ok(wait_error_log($t, qr/crawlward: dns verified \(stale\) for agent "Googlebot"/), 'error log: the stale verdict, at info');

# DNS answers again for 192.0.2.2, and says it is no crawler's: spoofed at once
write_records($file, { %records, ptr('192.0.2.1') => { servfail => 1 },
	ptr('192.0.2.2') => { PTR => 'host.example.net' }, 'host.example.net' => { A => '192.0.2.2' } });
is(claim('192.0.2.2'), '403 spoofed|block-403|spoofed|miss', 'DNS says no: spoofed, whatever it was');

# an unresolved TTL later it is asked again, still inside stale_verified
sleep 2.1;
is(claim('192.0.2.1'), '200 verified|allow|verified|stale', 'a while later, asked again: still verified');

# stale_verified (10 s) past the verified verdict's expiry (1 s), it holds no more
sleep(($t0 + 11.5) - time()) if time() < $t0 + 11.5;
is(claim('192.0.2.1'), '200 unverified|allow|unresolved|miss', 'past stale_verified: unresolved, unverified');

my $status = module_status('/crawlward-status');
is($status->{dns}{stale_verified}, 2, 'status: two lookups held on as stale');
is($status->{dns}{stale_verified_ms}, 10000, 'status: stale_verified');

# DNS back
write_records($file, \%records);
sleep 2.1;
is(claim('192.0.2.1'), '200 verified|allow|verified|miss', 'DNS back: verified');

###############################################################################
