#!/usr/bin/perl

# ngx_http_crawlward_module's DNS check tried by an attacker: silent reverse
# zones from one network and one IPv6 /64 cannot hold the lookup cap against
# a real Googlebot; a client that claims Googlebot and resets mid-lookup
# still gets its verdict cached (one query, not one per request); a zone
# filled with spoofed verdicts keeps the verified one; a resolver with
# ipv6=off makes an IPv6 claim unresolved, never spoofed; a claim whose
# verdict cannot change the action (robots.txt, an AI-training crawler the
# policy refuses anyway) starts no lookup; and workers with lookups in
# flight reload and stop cleanly.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use Time::HiRes qw/ time sleep /;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::DNS qw/ reverse_name /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $AMAZONBOT = 'Mozilla/5.0 (compatible; Amazonbot/0.1; '
	. '+https://developer.amazon.com/support/amazonbot)';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(20);

my $dir = render($t, 't/policies/dns-hostile.yaml');
my $d = $t->testdir();
write_page($t);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    # nginx's own resolver cache would hide repeated queries: keep it short
    resolver 127.0.0.1:%%PORT_8053_UDP%% valid=1s;
    resolver_timeout 3s;

    include $dir/crawlward-http.conf;

    crawlward_dns_cache zone=crawlward_dns:32k max_lookups=8
                        lookups_per_address=2 lookups_per_network=2;

    add_header X-DNS "\$crawlward_verdict|\$crawlward_action|\$crawlward_dns|\$crawlward_dns_cache" always;

    server {
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        server_name  localhost;

        set \$crawlward_maintenance "";
        crawlward on;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        location = /robots.txt {
            alias $dir/robots.txt;
        }

        location = /crawlward-status {
            crawlward off;
            crawlward_status;
        }
    }

    server {
        listen       127.0.0.1:%%PORT_8081%%;
        server_name  localhost;

        resolver 127.0.0.1:%%PORT_8053_UDP%% valid=1s ipv6=off;

        set \$crawlward_maintenance "";
        crawlward on;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

sub ptr { return reverse_name($_[0]); }

my %records = (
	ptr('192.0.2.1') => { PTR => 'crawl-1.googlebot.com' },
	'crawl-1.googlebot.com' => { A => '192.0.2.1' },
	ptr('192.0.2.2') => { PTR => 'crawl-2.googlebot.com' },
	'crawl-2.googlebot.com' => { A => '192.0.2.2' },
	ptr('192.0.2.20') => { PTR => 'crawl-20.googlebot.com', delay => 0.5 },
	'crawl-20.googlebot.com' => { A => '192.0.2.20' },
	ptr('192.0.2.30') => { PTR => 'crawl-30.crawl.amazonbot.amazon' },
	'crawl-30.crawl.amazonbot.amazon' => { A => '192.0.2.30' },
	ptr('192.0.2.31') => { PTR => 'crawl-31.googlebot.com' },
	'crawl-31.googlebot.com' => { A => '192.0.2.31' },
	ptr('2001:db8::5') => { PTR => 'crawl-v6.googlebot.com' },
	'crawl-v6.googlebot.com' => { AAAA => '2001:db8::5', A => '192.0.2.5' },
	ptr('192.0.2.40') => { silent => 1 },
);
$records{ptr("203.0.113.$_")} = { silent => 1 } for 1 .. 10;
$records{ptr("2001:db8:bad::$_")} = { silent => 1 } for 1 .. 4;

my $dns = Crawlward::DNS->start($t, port => port(8053, udp => 1),
	records => \%records);

$t->run();

###############################################################################

sub claim {
	my ($addr, %o) = @_;
	return get($o{uri} // '/page', ua => $GOOGLEBOT, xff => $addr, %o);
}

sub dns_header { return header($_[0], 'X-DNS') // '(none)'; }

sub ptr_count { return $dns->query_count('PTR', ptr($_[0])); }

sub start_claim {
	my ($addr) = @_;
	my $s = IO::Socket::INET->new(Proto => 'tcp',
		PeerAddr => '127.0.0.1:' . port(8080)) or die "connect: $!\n";
	print $s "GET /page HTTP/1.0\r\nHost: localhost\r\n"
		. "User-Agent: $GOOGLEBOT\r\nX-Forwarded-For: $addr\r\n\r\n";
	return $s;
}

sub finish {
	my ($s) = @_;
	local $/;
	my $r = <$s>;
	close $s;
	return $r;
}

# the lookup cap is fair: ten addresses of one /24 and four of one IPv6 /64
# whose reverse zones never answer hold 2 lookups each (of max_lookups=8),
# and a real Googlebot that comes next is looked up, not capped
my @silent = (map({ "203.0.113.$_" } 1 .. 10), map({ "2001:db8:bad::$_" } 1 .. 4));
my @s = map { start_claim($_) } @silent;
sleep(0.5);
my $r = claim('192.0.2.1');
is(dns_header($r), 'verified|allow|verified|miss',
	'fair cap: Googlebot verified while silent networks wait');
my @h = map { dns_header(finish($_)) } @s;
is(scalar(grep { /\|capped$/ } @h[0 .. 9]), 8, 'fair cap: one /24 held 2 lookups');
is(scalar(grep { /\|capped$/ } @h[10 .. 13]), 2, 'fair cap: one IPv6 /64 held 2 lookups');
is(scalar(grep { ptr_count($_) } @silent), 4, 'fair cap: 4 PTR queries from the silent networks');

# a client that claims Googlebot and resets mid-lookup, five times: one PTR
# query, and the verdict is cached for the next request
for (1 .. 5) {
	my $s = start_claim('192.0.2.20');
	sleep(0.05);
	close $s;
}
sleep(1.6);	# the answer came after 0.5s; nginx's resolver cache (valid=1s) is gone
$r = claim('192.0.2.20');
is(dns_header($r), 'verified|allow|verified|hit',
	'reset mid-lookup: the verdict was cached');
is(ptr_count('192.0.2.20'), 1, 'reset mid-lookup: one PTR query for five requests');
is($dns->query_count('A', 'crawl-20.googlebot.com'), 1,
	'reset mid-lookup: one forward query');

# no lookup where the verdict cannot change the action
$r = claim('192.0.2.31', uri => '/robots.txt');
is(status($r), 200, 'robots.txt: 200');
is(dns_header($r), 'unverified|allow||', 'robots.txt: no DNS check');
is(ptr_count('192.0.2.31'), 0, 'robots.txt: no PTR query');
$r = get('/page', ua => $AMAZONBOT, xff => '192.0.2.30');
is(status($r), undef, 'AI-training crawler: refused (444) whatever the verdict');
is(ptr_count('192.0.2.30'), 0, 'AI-training crawler: no PTR query');
is(dns_header(claim('192.0.2.31')), 'verified|allow|verified|miss',
	'the same address on a page: looked up');

# ipv6=off on the resolver: an IPv6 claim is unresolved, never spoofed
$r = claim('2001:db8::5', port => 8081);
is(dns_header($r), 'unverified|allow|unresolved|ipv6-off',
	'ipv6=off: an IPv6 claim is unresolved');
is(ptr_count('2001:db8::5'), 0, 'ipv6=off: no lookup');
claim('2001:db8::5', port => 8081) for 1 .. 5;
my $n = error_log_lines($t, qr/\[warn\].*resolver has ipv6=off/);
ok($n >= 1 && $n <= 2, "ipv6=off: said why, once per worker ($n lines)");
is(dns_header(claim('192.0.2.2', port => 8081)), 'verified|allow|verified|miss',
	'ipv6=off: IPv4 claims still verified');

# a zone filled with spoofed verdicts (no PTR) keeps the verified one, which
# nothing touched since it was cached
my $entries = module_status('/crawlward-status')->{dns}{zone}{entries};
for my $i (1 .. $entries + 50) {
	claim('10.' . ($i >> 16 & 255) . '.' . ($i >> 8 & 255) . '.' . ($i & 255));
}
my $st = module_status('/crawlward-status');
cmp_ok($st->{dns}{evictions}, '>=', 50, 'spoofed flood: the zone was full');
is(dns_header(claim('192.0.2.1')), 'verified|allow|verified|hit',
	'spoofed flood: the verified verdict kept');

# workers with lookups in flight, for a client gone, reload and stop cleanly
$r = start_claim('192.0.2.40');
sleep(0.3);
close $r;
$t->reload();
sleep(0.5);
$t->stop();
is(scalar(error_log_lines($t, qr/exited on signal|\[alert\]|\[emerg\]/)), 0,
	'lookups in flight at reload and stop: no crash');

###############################################################################
