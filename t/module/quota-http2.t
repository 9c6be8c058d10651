#!/usr/bin/perl

# The API key's header as nginx's $http_ variables find it, which is how
# the application behind nginx reads it: over HTTP/2, where names arrive in
# lower case and nginx keeps them as sent, a listed key is metered by its
# account's quota (five an hour, then 429) from any address, sharing it
# with HTTP/1.1; a made-up key and a key header sent twice name no account
# and meet the door's per-address rate class (1r/m, burst 2: three at
# once). Where underscores_in_headers lets them in, X_API_Key is the same
# header: alone it names its account, beside X-API-Key it is the key sent
# twice. With t/policies/quota.yaml and the tests' own HTTP/2 client.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ port /;
use Crawlward::Test;
use Crawlward::HTTP2;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http http_v2 realip map limit_req/)
	->plan(10);

my $dir = render($t, 't/policies/quota.yaml');
my $d = $t->testdir();
write_page($t);

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

    server {
        listen       127.0.0.1:%%PORT_8080%%$listen_h2;
        server_name  localhost;
        $http2_on

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }

    # HTTP/1 (nginx 1.22 takes only HTTP/2 on a cleartext http2 port)
    server {
        listen       127.0.0.1:%%PORT_8081%%;
        server_name  localhost;
        underscores_in_headers on;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

# one request at a time on one HTTP/2 connection: the statuses, in order
my $h2 = Crawlward::HTTP2->new(port(8080));
sub h2_statuses {
	my ($n, @headers) = @_;
	my @got;
	for my $i (1 .. $n) {
		my @h = map { ref $_ eq 'CODE' ? $_->($i) : $_ } @headers;
		my $sid = $h2->request('/api/items', 'user-agent' => $BROWSER, @h);
		my %done = $h2->collect([ $sid ], 5);
		my $st = $done{$sid};
		push @got, !$st || !$st->{done} ? 'none'
			: defined $st->{status} ? $st->{status} : "reset $st->{rst}";
	}
	return join ' ', @got;
}

# acme: five an hour, from five addresses, over HTTP/2; the sixth is the quota's 429
is(h2_statuses(6, 'x-api-key' => 'acme-key-1', 'x-forwarded-for' => sub { "192.0.2.$_[0]" }),
	'200 200 200 200 200 429', 'HTTP/2: a listed key is metered by its account (five an hour, then 429)');
ok(wait_error_log($t, qr/crawlward: 429: account "acme" \(tier standard\) is past its hourly quota/),
	'error log: the account named by the key sent over HTTP/2');

# beta: two over HTTP/1.1 and three over HTTP/2 share the account's five
my @r = map { get('/api/items', ua => $BROWSER, port => 8081, xff => "198.51.100.$_", headers => [ 'X-API-Key: beta-key' ]) } 1 .. 2;
is(join(' ', map { status($_) // 'none' } @r), '200 200', 'beta: two over HTTP/1.1');
is(h2_statuses(4, 'x-api-key' => 'beta-key', 'x-forwarded-for' => sub { "198.51.100.1$_[0]" }),
	'200 200 200 429', 'beta: three more over HTTP/2, then its quota refuses');

# no account: the door's per-address rate class, three at once, then 429
is(h2_statuses(4, 'x-api-key' => 'made-up-key', 'x-forwarded-for' => '192.0.2.50'),
	'200 200 200 429', 'HTTP/2: a made-up key gets the rate class');
is(h2_statuses(4, 'x-api-key' => 'gamma-key', 'x-api-key' => 'beta-key', 'x-forwarded-for' => '192.0.2.51'),
	'400 400 400 429', 'HTTP/2: the key header sent twice names no account: 400, after the rate class');

# underscores_in_headers on: X_API_Key is the key's header too, as $http_x_api_key reads it
my $under = get('/api/items', ua => $BROWSER, port => 8081, xff => '203.0.113.1', headers => [ 'X_API_Key: gamma-key' ]);
is(status($under), 200, 'X_API_Key alone: 200');
is(header($under, 'RateLimit-Policy'), '"hourly";q=100;w=3600, "daily";q=4;w=86400', 'X_API_Key alone names its account (gamma, the partner tier)');
@r = map { get('/api/items', ua => $BROWSER, port => 8081, xff => '203.0.113.2', headers => [ 'X-API-Key: gamma-key', 'X_API_Key: beta-key' ]) } 1 .. 4;
is(join(' ', map { status($_) // 'none' } @r), '400 400 400 429', 'X-API-Key beside X_API_Key: the key sent twice, 400, after the rate class');
is(header($r[0], 'RateLimit'), undef, 'X-API-Key beside X_API_Key: no quota');

###############################################################################
