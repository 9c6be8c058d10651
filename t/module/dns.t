#!/usr/bin/perl

# ngx_http_crawlward_module, forward-confirmed reverse DNS through nginx's
# resolver against the tests' own DNS server: verified, wrong suffix, suffix
# on a non-label boundary, forward mismatch, NXDOMAIN, SERVFAIL, timeout
# (bounded by resolver_timeout, fail policy applied), cache hits that ask
# DNS nothing, expiry of negative verdicts, one lookup for 100 concurrent
# requests over 2 workers, the cap on lookups in flight, a client leaving
# while it waits (counted on its provisional verdict; its lookup still caches its verdict), IPv6 (ip6.arpa) through realip and over [::1], the cache
# kept over a reload, and the status endpoint's figures.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use IO::Socket::IP;
use Time::HiRes qw/ time sleep /;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::DNS qw/ reverse_name /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

my $IPV6 = IO::Socket::IP->new(
	Proto => 'tcp', LocalHost => '::1', LocalPort => 0, Listen => 1,
) ? 1 : 0;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(77);

my $dir = render($t, 't/policies/dns.yaml');
my $d = $t->testdir();
write_page($t);

my $listen6 = $IPV6 ? 'listen       [::1]:%%PORT_8080%%;' : '';

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

    include $dir/crawlward-http.conf;

    log_format dns '\$remote_addr \$crawlward_verdict \$crawlward_dns '
                   '\$crawlward_dns_cache \$status';

    server {
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        $listen6
        server_name  localhost;

        include $dir/crawlward-server.conf;

        access_log $d/dns-access.log dns;

        location / {
            root $d/www;
            try_files /page.html =404;

            add_header X-DNS "\$crawlward_verdict|\$crawlward_action|\$crawlward_dns|\$crawlward_dns_cache" always;
        }
    }
}

EOF

# 192.0.2.x claim Googlebot through X-Forwarded-For: one address per case
my %records = (
	ptr('192.0.2.1') => { PTR => 'crawl-192-0-2-1.googlebot.com' },
	'crawl-192-0-2-1.googlebot.com' => { A => '192.0.2.1' },
	ptr('192.0.2.2') => { PTR => 'crawl.example.net' },
	'crawl.example.net' => { A => '192.0.2.2' },
	ptr('192.0.2.3') => { PTR => 'evilgooglebot.com' },
	'evilgooglebot.com' => { A => '192.0.2.3' },
	ptr('192.0.2.13') => { PTR => 'googlebot.com.evil.net' },
	'googlebot.com.evil.net' => { A => '192.0.2.13' },
	ptr('192.0.2.4') => { PTR => 'crawl-4.googlebot.com' },
	'crawl-4.googlebot.com' => { A => '192.0.2.99' },
	# 192.0.2.5: no PTR (NXDOMAIN)
	ptr('192.0.2.6') => { servfail => 1 },
	ptr('192.0.2.7') => { silent => 1 },
	ptr('192.0.2.8') => { PTR => 'rate-limited-proxy.google.com' },
	'rate-limited-proxy.google.com' => { A => [ '192.0.2.77', '192.0.2.8' ] },
	ptr('192.0.2.50') => { PTR => 'crawl-50.googlebot.com', delay => 0.5 },
	'crawl-50.googlebot.com' => { A => '192.0.2.50' },
	ptr('192.0.2.60') => { silent => 1 },
	ptr('192.0.2.9') => { PTR => 'crawl-9.googlebot.com' },
	'crawl-9.googlebot.com' => { A => '192.0.2.9' },
	ptr('2001:db8::5') => { PTR => 'crawl-v6.googlebot.com' },
	'crawl-v6.googlebot.com' => { AAAA => '2001:db8::5' },
	ptr('::1') => { PTR => 'localhost.googlebot.com' },
	'localhost.googlebot.com' => { AAAA => '::1' },
);
$records{ptr("198.51.100.$_")} = { PTR => "slow-$_.googlebot.com",
	delay => 1.5 } for 1 .. 6;

my $dns = Crawlward::DNS->start($t, port => port(8053, udp => 1),
	records => \%records);

$t->run();

###############################################################################

sub ptr { return reverse_name($_[0]); }

sub claim {
	my ($addr, %o) = @_;
	return get('/page', ua => $GOOGLEBOT, xff => $addr, %o);
}

sub dns_header { return header($_[0], 'X-DNS') // '(none)'; }

sub ptr_count { return $dns->query_count('PTR', ptr($_[0])); }

# a verified claim: 200, verdict verified, one PTR and one forward query
my $r = claim('192.0.2.1');
is(status($r), 200, 'verified: 200');
is(dns_header($r), 'verified|allow|verified|miss', 'verified: variables');
is(ptr_count('192.0.2.1'), 1, 'verified: one PTR query');
is($dns->query_count('A', 'crawl-192-0-2-1.googlebot.com'), 1,
	'verified: one forward query');

# the cache answers the next claims: DNS is not asked again
$r = claim('192.0.2.1');
is(dns_header($r), 'verified|allow|verified|hit', 'cache hit: variables');
claim('192.0.2.1') for 1 .. 5;
is(ptr_count('192.0.2.1'), 1, 'cache hit: PTR count does not move');
is($dns->query_count('A', 'crawl-192-0-2-1.googlebot.com'), 1,
	'cache hit: forward count does not move');

# impostors
$r = claim('192.0.2.2');
is(status($r), 403, 'wrong suffix: 403');
is(dns_header($r), 'spoofed|block-403|spoofed|miss', 'wrong suffix: spoofed');
is($dns->query_count('A', 'crawl.example.net'), 0,
	'wrong suffix: no forward lookup');

is(dns_header(claim('192.0.2.3')), 'spoofed|block-403|spoofed|miss',
	'suffix without a label boundary (evilgooglebot.com): spoofed');
is(dns_header(claim('192.0.2.13')), 'spoofed|block-403|spoofed|miss',
	'suffix in the middle (googlebot.com.evil.net): spoofed');

$r = claim('192.0.2.4');
is(dns_header($r), 'spoofed|block-403|spoofed|miss',
	'forward lookup does not confirm: spoofed');
is($dns->query_count('A', 'crawl-4.googlebot.com'), 1,
	'forward mismatch: the forward lookup was made');

is(dns_header(claim('192.0.2.5')), 'spoofed|block-403|spoofed|miss',
	'no PTR (NXDOMAIN): spoofed');

is(dns_header(claim('192.0.2.8')), 'verified|allow|verified|miss',
	'the address among several forward answers: verified');

# DNS trouble: the fail policy (unverified), never a 500, never a hang
$r = claim('192.0.2.6');
is(status($r), 200, 'SERVFAIL: 200');
is(dns_header($r), 'unverified|allow|unresolved|miss',
	'SERVFAIL: unresolved, treated as unverified');

my $start = time();
$r = claim('192.0.2.7');
my $took = time() - $start;
is(status($r), 200, 'timeout: 200');
is(dns_header($r), 'unverified|allow|unresolved|miss',
	'timeout: unresolved, treated as unverified');
cmp_ok($took, '>=', 0.9, 'timeout: waited for resolver_timeout (1s)');
cmp_ok($took, '<', 1.6, 'timeout: answered within resolver_timeout + 0.6s');

# negative verdicts expire (spoofed=2s, unresolved=2s in the policy)
is(dns_header(claim('192.0.2.2')), 'spoofed|block-403|spoofed|hit',
	'spoofed verdict cached');
is(dns_header(claim('192.0.2.6')), 'unverified|allow|unresolved|hit',
	'unresolved verdict cached');
is(ptr_count('192.0.2.2') . ' ' . ptr_count('192.0.2.6'), '1 1',
	'negative verdicts from the cache: no new queries');
sleep(2.2);
is(dns_header(claim('192.0.2.2')), 'spoofed|block-403|spoofed|miss',
	'spoofed verdict expired: looked up again');
is(ptr_count('192.0.2.2'), 2, 'spoofed verdict expired: a second PTR query');
is(dns_header(claim('192.0.2.6')), 'unverified|allow|unresolved|miss',
	'unresolved verdict expired: looked up again');
is(dns_header(claim('192.0.2.1')), 'verified|allow|verified|hit',
	'verified verdict still cached (1d)');

# ranges first: the published range needs no DNS
$r = get('/page', ua => $GOOGLEBOT, xff => '127.0.0.2');
is(dns_header($r), 'verified|allow||', 'in the published range: no DNS check');
is(ptr_count('127.0.0.2'), 0, 'in the published range: no PTR query');

# a browser from a new address: no lookup
$r = get('/page', ua => 'Mozilla/5.0 Firefox/133.0', xff => '192.0.2.200');
is(dns_header($r), 'none|allow||', 'browser: no DNS check');
is(ptr_count('192.0.2.200'), 0, 'browser: no PTR query');

# 100 concurrent requests from one new address, over 2 workers: one PTR, one A
my @s = map { start_claim('192.0.2.50') } 1 .. 100;
my @h = map { dns_header(finish($_)) } @s;
my %seen;
$seen{$_}++ for @h;
is(scalar(grep { /^verified\|allow\|verified\|(miss|wait|hit)$/ } @h), 100,
	'100 concurrent: all verified');
is($seen{'verified|allow|verified|miss'}, 1,
	'100 concurrent: one request looked it up');
is(ptr_count('192.0.2.50'), 1, '100 concurrent: exactly one PTR query');
is($dns->query_count('A', 'crawl-50.googlebot.com'), 1,
	'100 concurrent: exactly one forward query');

# the cap on lookups in flight (max_lookups=4): 6 new addresses at once,
# each PTR answered after 1.5s; 4 look up, 2 get the fail policy at once
$start = time();
@s = map { start_claim("198.51.100.$_") } 1 .. 6;
my @capped = grep { /\|capped$/ } map { dns_header(finish($_)) } @s;
is(scalar @capped, 2, 'lookup cap: 2 of 6 capped');
is($capped[0], 'unverified|allow|unresolved|capped',
	'lookup cap: the unresolved policy');
is(scalar(grep { ptr_count("198.51.100.$_") } 1 .. 6), 4,
	'lookup cap: 4 PTR queries');

# a client that leaves while its lookup is in flight: the lookup goes on,
# ends at resolver_timeout and caches its verdict for the next request
my $st = module_status('/crawlward-status');
my $before = $st->{dns}{lookups_started};
my $counted = module_count($st, 'Googlebot', 'unverified', 'allow');
my $s = start_claim('192.0.2.60');
sleep(0.3);
close $s;
sleep(0.3);
$st = module_status('/crawlward-status');
is($st->{dns}{lookups_in_flight}, 1, 'client gone: its lookup still in flight');
is($st->{dns}{lookups_started} - $before, 1, 'client gone: one lookup started');
is(module_count($st, 'Googlebot', 'unverified', 'allow') - $counted, 1,
	'client gone: the request counted, on its provisional verdict');
sleep(0.6);
$st = module_status('/crawlward-status');
is($st->{dns}{lookups_in_flight}, 0, 'client gone: the lookup ended');
is(module_count($st, 'Googlebot', 'unverified', 'allow') - $counted, 1,
	'client gone: counted once, also after its lookup ended');
$start = time();
$r = claim('192.0.2.60');
is(dns_header($r), 'unverified|allow|unresolved|hit',
	'client gone: the next request has its verdict from the cache');
cmp_ok(time() - $start, '<', 0.5, 'client gone: the next request waits for nothing');
is(ptr_count('192.0.2.60'), 1, 'client gone: DNS was asked once');

# the owner's client leaves while another request waits for its lookup:
# the waiter gets the verdict of the lookup the owner started
sleep(2.2);	# the unresolved verdict above expires (unresolved=2s)
my $owner = start_claim('192.0.2.60');
sleep(0.1);
my $waiter = start_claim('192.0.2.60');
sleep(0.2);
close $owner;
$start = time();
is(dns_header(finish($waiter)), 'unverified|allow|unresolved|wait',
	'owner gone: the waiter has the verdict of the owner\'s lookup');
cmp_ok(time() - $start, '<', 1.0,
	'owner gone: the waiter answered within its own resolver_timeout');
is(ptr_count('192.0.2.60'), 2, 'owner gone: no second query');

# an IPv4-mapped address (realip) is asked for by its in-addr.arpa name
$r = claim('::ffff:192.0.2.9');
is(dns_header($r), 'verified|allow|verified|miss', 'IPv4-mapped: verified');
is(ptr_count('192.0.2.9'), 1, 'IPv4-mapped: the in-addr.arpa PTR query');
is(dns_header(claim('192.0.2.9')), 'verified|allow|verified|hit',
	'IPv4-mapped: the same cache entry as the IPv4 address');

# IPv6 through realip: ip6.arpa, AAAA
$r = claim('2001:db8::5');
is(dns_header($r), 'verified|allow|verified|miss', 'IPv6 (realip): verified');
is(ptr_count('2001:db8::5'), 1, 'IPv6 (realip): one ip6.arpa PTR query');
is($dns->query_count('AAAA', 'crawl-v6.googlebot.com'), 1,
	'IPv6 (realip): one AAAA query');

SKIP: {
skip 'no ::1 on this machine', 2 unless $IPV6;

$r = get('/page', ua => $GOOGLEBOT, addr => '::1');
is(dns_header($r), 'verified|allow|verified|miss', 'over [::1]: verified');
is(ptr_count('::1'), 1, 'over [::1]: one ip6.arpa PTR query');

}

# status endpoint
$st = module_status('/crawlward-status');
my $s4 = $st->{dns};
ok($s4, 'status: dns section');
is($s4->{zone}{name}, 'crawlward_dns', 'status: zone name');
cmp_ok($s4->{zone}{entries}, '>', 100, 'status: zone entries');
cmp_ok($s4->{hits}, '>=', 10, 'status: hits');
cmp_ok($s4->{lookups_started}, '>=', 18, 'status: lookups started');
is($s4->{lookups_capped}, 2, 'status: lookups capped');
cmp_ok($s4->{verdicts}{verified}, '>=', 4, 'status: verified verdicts');
cmp_ok($s4->{verdicts}{spoofed}, '>=', 6, 'status: spoofed verdicts');
cmp_ok($s4->{verdicts}{unresolved}, '>=', 3, 'status: unresolved verdicts');

my $prom = get('/crawlward-status?format=prometheus', ua => undef);
like($prom, qr/^crawlward_dns_lookups_capped_total\{zone="crawlward_dns"\} 2$/m,
	'prometheus: capped lookups');
like($prom, qr/^crawlward_dns_verdicts_total\{zone="crawlward_dns",verdict="verified"\} \d+$/m,
	'prometheus: verdicts');

# a full zone evicts the least recently used verdicts, and never fails a
# request: rotate through more new addresses (no PTR: spoofed) than it holds
my $entries = $s4->{zone}{entries};
my %codes;
for my $i (1 .. $entries + 100) {
	my $addr = '10.' . ($i >> 16 & 255) . '.' . ($i >> 8 & 255) . '.' . ($i & 255);
	$codes{ status(claim($addr)) // 'none' }++;
	# Googlebot keeps coming back: its verdict stays recently used
	$codes{ 'hit' }++ if $i % 50 == 0
		&& dns_header(claim('192.0.2.1')) =~ /\|hit$/;
}
is(join(' ', map { "$_ x$codes{$_}" } sort keys %codes),
	'403 x' . ($entries + 100) . ' hit x' . int(($entries + 100) / 50),
	'full zone: every claim decided (spoofed, 403), Googlebot from the cache');
$st = module_status('/crawlward-status');
cmp_ok($st->{dns}{evictions}, '>=', 100, 'full zone: evictions counted');
is($st->{dns}{zone}{entries_used}, $entries, 'full zone: entries stay put');
is(dns_header(claim('192.0.2.1')), 'verified|allow|verified|hit',
	'full zone: the recently used verdict is kept');

# a reload keeps the cache
$t->reload();
$r = claim('192.0.2.1');
is(dns_header($r), 'verified|allow|verified|hit', 'after reload: cache hit');
is(ptr_count('192.0.2.1'), 1, 'after reload: no new PTR query');

# the access log has the final verdict, not the provisional one
my @log = grep { /^192\.0\.2\.4 / } split /\n/, $t->read_file('dns-access.log');
is($log[0], '192.0.2.4 spoofed spoofed miss 403', 'access log: final verdict');

###############################################################################

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

###############################################################################
