#!/usr/bin/perl

# A proxy in front on a unix socket: "unix:" in site.trusted_proxies renders
# set_real_ip_from unix:, and the address it forwards is the client's. A
# request on the socket that comes with no address leaves every such client
# one key for the limits, the budgets and the ladder: the module says so
# once per worker, at warn.

use warnings;
use strict;

use Test::More;

use IO::Socket::UNIX;
use Time::HiRes qw/ sleep /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map/)->plan(8);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1, "unix:"]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-unix
  throttle_log: /var/log/nginx/unix-throttled.log
robots: {}
module: {}
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

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        listen       unix:$d/front.sock;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Client \$remote_addr always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

# a GET on the unix socket, with these header lines
sub on_socket {
	my (@headers) = @_;
	return raw_on_socket(join("\r\n", 'GET / HTTP/1.0', 'Host: localhost',
		'User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0',
		@headers, '', ''));
}

sub raw_on_socket {
	my ($request) = @_;
	my $s = IO::Socket::UNIX->new(Peer => "$d/front.sock", Type => SOCK_STREAM)
		or return '';
	print $s $request;
	local $/;
	my $reply = <$s> // '';
	close $s;
	return $reply;
}

my $WARNING = qr/crawlward: a request came on a unix socket with no client address/;

like(rendered_file($t, 'crawlward-http.conf'), qr/^\s*set_real_ip_from unix:;$/m,
	'"unix:" in trusted_proxies: set_real_ip_from unix:');

# a request nginx answers before realip runs (a bad request line) has the socket's
# address whatever the trusted proxies: not one to warn about
like(raw_on_socket("GET /\x01 HTTP/1.0\r\n\r\n"), qr/^HTTP\/1\.1 400 /, 'a bad request on the socket: 400');

my $r = on_socket('X-Forwarded-For: 192.0.2.7');
like($r, qr/^HTTP\/1\.1 200 /, 'on the socket, with the proxy\'s address: 200');
like($r, qr/^X-Client: 192\.0\.2\.7\r$/m, 'the client is the address the proxy forwarded');
is(scalar(grep { $_ =~ $WARNING } error_log_lines($t)), 0, 'nothing to say of either');

$r = on_socket();
like($r, qr/^X-Client: unix:\r$/m, 'on the socket with no address: the socket is the client');
on_socket();
ok(wait_error_log($t, $WARNING), 'the module says every such client is one key');
sleep(0.2);
is(scalar(grep { $_ =~ $WARNING } error_log_lines($t)), 1, 'once');

###############################################################################
