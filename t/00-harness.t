# Self-test of the Test::Nginx harness against a stock nginx: return codes, 444, client address, proxy to a daemon, reload.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use Socket qw/ CRLF /;

use Test::Nginx;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http rewrite proxy/)->plan(12);

my $conf = <<'EOF';

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        location = /ok {
            return 200 "ok\n";
        }

        location = /drop {
            return 444;
        }

        location = /limited {
            add_header Retry-After 7 always;
            return 429;
        }

        location = /addr {
            return 200 "$remote_addr";
        }

        location = /version {
            return 200 "VERSION\n";
        }

        location /backend/ {
            proxy_pass http://127.0.0.1:%%PORT_8081%%/;
        }
    }
}

EOF

(my $v1 = $conf) =~ s/VERSION/v1/;
(my $v2 = $conf) =~ s/VERSION/v2/;

$t->write_file_expand('nginx.conf', $v1);
$t->run_daemon(\&backend, port(8081));
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start backend on port " . port(8081) . "\n";

###############################################################################

my $r = http_get('/ok');
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'return 200 status line');
is(body($r), "ok\n", 'return 200 body');

like(http_head('/ok'), qr!^HTTP/1\.1 200 OK\x0d\x0a.*\x0d\x0a\x0d\x0a\z!s,
	'head has no body');

is(http_get('/drop'), '', 'return 444 closes without reply');

$r = http_get('/limited');
like($r, qr!^HTTP/1\.1 429 !, 'return 429 status line');
like($r, qr!^Retry-After: 7\x0d$!m, 'add_header always on 429');

SKIP: {
	my $s = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => '127.0.0.2',
		PeerAddr => '127.0.0.1:' . port(8080),
	);
	skip "can't connect from 127.0.0.2: $@", 1 unless $s;

	is(body(http_get('/addr', socket => $s)), '127.0.0.2',
		'remote_addr of client bound to 127.0.0.2');
}

like(http_get('/backend/hello'), qr!\x0d\x0a\x0d\x0abackend: /hello\n\z!,
	'proxied to daemon');

is(body(http_get('/version')), "v1\n", 'config before reload');

$t->write_file_expand('nginx.conf', $v2);
$t->reload();

# the upstream harness does not wait in reload(), so poll (bounded)
my $tries = 0;
while ($tries++ < 50) {
	last if (body(http_get('/version')) // '') eq "v2\n";
	select undef, undef, undef, 0.1;
}
note("reload took effect after $tries request(s)");

is(body(http_get('/version')), "v2\n", 'config after reload');
like(http_get('/ok'), qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'answers after reload');
like(http_get('/backend/again'), qr!backend: /again\n\z!,
	'proxy after reload');

###############################################################################

sub body {
	my ($reply) = @_;
	return undef unless defined $reply;
	return $reply =~ /\x0d\x0a\x0d\x0a(.*)\z/s ? $1 : undef;
}

# minimal HTTP/1.0 backend: one reply per connection, echoes the URI
sub backend {
	my ($port) = @_;

	my $server = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => "127.0.0.1:$port",
		Listen => 5,
		ReuseAddr => 1,
	)
		or die "Can't listen on 127.0.0.1:$port: $@\n";

	while (my $client = $server->accept()) {
		$client->autoflush(1);

		my $head = '';
		eval {
			local $SIG{ALRM} = sub { die "timeout\n" };
			alarm(5);
			while (<$client>) {
				$head .= $_;
				last if /^\x0d?\x0a$/;
			}
			alarm(0);
		};
		alarm(0);

		my ($uri) = $head =~ m!^\S+ (\S+) HTTP/!;
		$uri //= '?';

		print $client 'HTTP/1.0 200 OK' . CRLF
			. 'Content-Type: text/plain' . CRLF
			. 'Connection: close' . CRLF
			. CRLF
			. "backend: $uri\n";

		close $client;
	}
}

###############################################################################
