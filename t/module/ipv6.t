# ngx_http_crawlward_module and client addresses: Googlebot over [::1], IPv6 and IPv4-mapped ranges through realip from the trusted 127.0.0.1, and X-Forwarded-For from an untrusted address ignored.

use warnings;
use strict;

use Test::More;

use IO::Socket::IP;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

# can this machine listen on ::1?
my $IPV6 = IO::Socket::IP->new(
	Proto => 'tcp', LocalHost => '::1', LocalPort => 0, Listen => 1,
) ? 1 : 0;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(27);

my $dir = render($t, 't/policies/module.yaml');
my $d = $t->testdir();
write_page($t);

my $listen6 = $IPV6 ? 'listen       [::1]:%%PORT_8080%%;' : '';

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        $listen6
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
            add_header X-Addr "\$remote_addr" always;
        }
    }
}

EOF

$t->run();

###############################################################################

# realip is rendered at the http level from trusted_proxies

like(rendered_file($t, 'crawlward-http.conf'),
	qr/^set_real_ip_from 127\.0\.0\.1\/32;\nreal_ip_header X-Forwarded-For;\nreal_ip_recursive on;$/m,
	'http snippet: realip from 127.0.0.1');

# over IPv6: ::1/128 is one of Googlebot's ranges

SKIP: {
	skip 'cannot listen on ::1', 7 unless $IPV6;

	my $r = get('/page', ua => $GOOGLEBOT, addr => '::1');
	like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'Googlebot from ::1: 200');
	is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
		'Googlebot from ::1: verified');
	is(header($r, 'X-Addr'), '::1', 'Googlebot from ::1: $remote_addr ::1');
	is(body($r), PAGE, 'Googlebot from ::1: the page');

	# ::1 is not a trusted proxy: its X-Forwarded-For is ignored
	$r = get('/page', ua => $GOOGLEBOT, addr => '::1', xff => '203.0.113.9');
	is(status($r), 200, 'Googlebot from ::1, X-Forwarded-For 203.0.113.9: 200');
	is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
		'... the header from the untrusted ::1 is ignored: verified');

	# GPTBot over IPv6 is refused as over IPv4
	is(get('/page', ua => 'GPTBot/1.2', addr => '::1'), '',
		'GPTBot from ::1: 444');
}

# through realip from the trusted 127.0.0.1

my $r = get('/page', ua => $GOOGLEBOT, xff => '2001:db8::5');
is(status($r), 200, 'X-Forwarded-For 2001:db8::5 via 127.0.0.1: 200');
is(header($r, 'X-Addr'), '2001:db8::5', '... $remote_addr 2001:db8::5');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'... verified (2001:db8::/32)');

$r = get('/page', ua => $GOOGLEBOT, xff => '2001:db9::5');
is($r, '', 'X-Forwarded-For 2001:db9::5 via 127.0.0.1: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "Googlebot", verdict spoofed, client: 2001:db9::5,/)),
	1, '... spoofed, client 2001:db9::5 in the log line');

$r = get('/page', ua => $GOOGLEBOT, xff => '::ffff:192.0.2.7');
is(status($r), 200, 'X-Forwarded-For ::ffff:192.0.2.7 via 127.0.0.1: 200');
like(header($r, 'X-Addr') // '', qr/^::ffff:192\.0\.2\.7$/i,
	'... $remote_addr ::ffff:192.0.2.7');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'... verified: the IPv4-mapped address is in 192.0.2.0/24');

$r = get('/page', ua => $GOOGLEBOT, xff => '192.0.2.200');
is(status($r), 200, 'X-Forwarded-For 192.0.2.200 via 127.0.0.1: 200');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'... verified');

is(get('/page', ua => $GOOGLEBOT, xff => '203.0.113.9'), '',
	'X-Forwarded-For 203.0.113.9 via 127.0.0.1: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "Googlebot", verdict spoofed, client: 203\.0\.113\.9,/)),
	1, '... spoofed, client 203.0.113.9 in the log line');

is(get('/page', ua => $GOOGLEBOT, xff => '::ffff:203.0.113.9'), '',
	'X-Forwarded-For ::ffff:203.0.113.9 via 127.0.0.1: 444');

# a chain: realip_recursive skips trusted addresses from the right
$r = get('/page', ua => $GOOGLEBOT, xff => '203.0.113.9, 2001:db8::5, 127.0.0.1');
is(header($r, 'X-Addr'), '2001:db8::5',
	'X-Forwarded-For 203.0.113.9, 2001:db8::5, 127.0.0.1: $remote_addr 2001:db8::5');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'... verified');

# the same header from an untrusted 127.0.0.9 is ignored

is(get('/page', ua => $GOOGLEBOT, from => '127.0.0.9', xff => '2001:db8::5'),
	'', 'X-Forwarded-For 2001:db8::5 from untrusted 127.0.0.9: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "Googlebot", verdict spoofed, client: 127\.0\.0\.9,/)),
	1, '... spoofed, client 127.0.0.9 in the log line');

$r = get('/page', ua => BROWSER, from => '127.0.0.9', xff => '2001:db8::5');
is(header($r, 'X-Addr'), '127.0.0.9',
	'browser from untrusted 127.0.0.9 with X-Forwarded-For: $remote_addr 127.0.0.9');

# and a verified Googlebot behind an untrusted address stays verified by its own address
$r = get('/page', ua => $GOOGLEBOT, from => '127.0.0.2', xff => '203.0.113.9');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'Googlebot from 127.0.0.2 with X-Forwarded-For 203.0.113.9: verified');

###############################################################################
