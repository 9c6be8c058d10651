#!/usr/bin/perl

# ngx_http_crawlward_module's forward-confirmed reverse DNS against unbound,
# the resolver Debian sysadmins run, configured by the test with local
# records (local-data, local-data-ptr) on 127.0.0.1: verified over IPv4 and
# IPv6, wrong suffix, forward mismatch, no PTR, and cache hits that send
# unbound nothing.  Skipped when /usr/sbin/unbound is not installed.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ time sleep /;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::DNS qw/ query /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $UNBOUND = $ENV{TEST_UNBOUND} || '/usr/sbin/unbound';
plan(skip_all => "no $UNBOUND (apt-get install unbound)") unless -x $UNBOUND;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(17);

my $dir = render($t, 't/policies/dns.yaml');
my $d = $t->testdir();
write_page($t);

my $port = port(8053, udp => 1);

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

# UDP only: the harness holds the TCP port of the same number
$t->write_file('unbound.conf', <<"EOF");
server:
    interface: 127.0.0.1
    port: $port
    do-tcp: no
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    username: ""
    chroot: ""
    directory: "$d"
    pidfile: "$d/unbound.pid"
    use-syslog: no
    logfile: "$d/unbound.log"
    log-queries: yes
    verbosity: 1
    do-daemonize: no
    module-config: "iterator"
    cache-max-ttl: 0
    local-zone: "googlebot.com." static
    local-zone: "example.net." static
    local-zone: "2.0.192.in-addr.arpa." static
    local-zone: "8.b.d.0.1.0.0.2.ip6.arpa." static
    local-data: "crawl-192-0-2-1.googlebot.com. 60 IN A 192.0.2.1"
    local-data-ptr: "192.0.2.1 60 crawl-192-0-2-1.googlebot.com."
    local-data-ptr: "192.0.2.11 60 crawl-192-0-2-1.googlebot.com."
    local-data: "crawl.example.net. 60 IN A 192.0.2.2"
    local-data-ptr: "192.0.2.2 60 crawl.example.net."
    local-data: "crawl-4.googlebot.com. 60 IN A 192.0.2.99"
    local-data-ptr: "192.0.2.4 60 crawl-4.googlebot.com."
    local-data: "crawl-v6.googlebot.com. 60 IN AAAA 2001:db8::5"
    local-data-ptr: "2001:db8::5 60 crawl-v6.googlebot.com."
remote-control:
    control-enable: no
EOF

$t->run_daemon($UNBOUND, '-d', '-c', "$d/unbound.conf");
wait_unbound($port) or die "unbound did not answer on 127.0.0.1:$port\n";

$t->run();

###############################################################################

sub wait_unbound {
	my ($port) = @_;
	for (1 .. 50) {
		my $r = query($port, 'crawl-192-0-2-1.googlebot.com', 'A',
			timeout => 0.2);
		return 1 if $r && @{ $r->{data} || [] };
		sleep(0.1);
	}
	return 0;
}

sub claim {
	my ($addr, $ua) = @_;
	my $r = get('/page', ua => $ua // $GOOGLEBOT, xff => $addr);
	return (status($r) // 'none') . ' ' . (header($r, 'X-DNS') // '(none)');
}

# queries unbound logged for a name and type ("info: 127.0.0.1 NAME. TYPE IN")
# (reads the file by its path: a closure over $t would keep nginx running
# past the end of the test)
my $unbound_log = "$d/unbound.log";

sub asked {
	my ($name, $type) = @_;
	open my $fh, '<', $unbound_log or return 0;
	my $log = do { local $/; <$fh> };
	my @n = $log =~ /info: 127\.0\.0\.1 \Q$name\E\. $type IN$/mgi;
	return scalar @n;
}

my $ptr1 = '1.2.0.192.in-addr.arpa';

is(claim('192.0.2.1'), '200 verified|allow|verified|miss', 'verified');
is(asked($ptr1, 'PTR'), 1, 'verified: unbound saw one PTR query');
is(asked('crawl-192-0-2-1.googlebot.com', 'A'), 2,
	'verified: unbound saw one A query (and the readiness probe)');

is(claim('192.0.2.1'), '200 verified|allow|verified|hit', 'cache hit');
# another Google agent with the same suffixes shares the verdict
is(claim('192.0.2.1', 'Storebot-Google/1.0'), '200 verified|allow|verified|hit',
	'same suffixes, another agent: the cached verdict');
# an agent with other suffixes (AdsBot-Google: google.com only) gets its own
# check, which nginx's resolver answers from its own cache (valid=1s)
# before returning: the request goes on at once
is(claim('192.0.2.1', 'AdsBot-Google (+http://www.google.com/adsbot.html)'),
	'403 spoofed|block-403|spoofed|miss',
	'other suffixes: a googlebot.com name is not under google.com');
is(asked($ptr1, 'PTR'), 1, 'other suffixes: the PTR answer came from nginx\'s cache');
# an address whose PTR name is another address's: the forward lookup is
# answered from nginx's cache, and does not confirm it
is(claim('192.0.2.11'), '403 spoofed|block-403|spoofed|miss',
	'a borrowed PTR name: spoofed');
is(asked('crawl-192-0-2-1.googlebot.com', 'A'), 2,
	'a borrowed PTR name: the A answer came from nginx\'s cache');

sleep(1.2);	# past nginx's own resolver cache (valid=1s)
is(claim('192.0.2.1'), '200 verified|allow|verified|hit',
	'cache hit after the resolver cache expired');
is(asked($ptr1, 'PTR'), 1, 'cache hits: no new PTR query');

is(claim('192.0.2.2'), '403 spoofed|block-403|spoofed|miss', 'wrong suffix');
is(asked('crawl.example.net', 'A'), 0, 'wrong suffix: no forward query');
is(claim('192.0.2.4'), '403 spoofed|block-403|spoofed|miss',
	'forward mismatch');
is(claim('192.0.2.5'), '403 spoofed|block-403|spoofed|miss',
	'no PTR (NXDOMAIN from a static zone)');

is(claim('2001:db8::5'), '200 verified|allow|verified|miss', 'IPv6: verified');
is(asked('5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa',
	'PTR'), 1, 'IPv6: one ip6.arpa PTR query');

###############################################################################
