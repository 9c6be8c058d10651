#!/usr/bin/perl

# Bad input meets a decision, never a crash (issue 11, first part): 16 KB
# headers, 10,000 query parameters, NUL bytes, broken percent-encoding,
# HTTP/1.0 without Host, pipelined requests, with the module, its facet
# guard and crawl budgets (t/policies/protect.yaml). Each answer is asserted,
# and the harness's last tests find no alert in the error log (a worker
# that died on a signal leaves one).

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1)';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn limit_req/)->plan(17);

my $dir = render($t, 't/policies/protect.yaml');
my $d = $t->testdir();
write_page($t);

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
        server_name  localhost;

        # room for 16 KB headers and 10,000 parameters, so that they reach the module
        large_client_header_buffers 4 64k;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }

    server {
        listen       127.0.0.1:%%PORT_8081%%;
        server_name  localhost;

        # nginx's default buffers: nginx answers what does not fit
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

sub raw {
	my ($req, %o) = @_;
	return http($req, %o) // '';
}

# 16 KB headers
my $long = 'x' x 16384;
is(status(get('/page', ua => "Mozilla/5.0 Chrome/131 $long")), 200,
	'a 16 KB browser User-Agent: 200');
is(status(get('/page', ua => "$GOOGLEBOT $long", xff => '192.0.2.9')), undef,
	'a 16 KB User-Agent claiming Googlebot from elsewhere: spoofed, 444');
is(status(get('/glam/browse?subjects=1&places=2', ua => BROWSER,
	referer => "https://example.org/$long")), 200,
	'a 16 KB same-site Referer: its host is read, 200');
is(status(get('/page', ua => BROWSER, headers => [ "Cookie: a=$long" ])), 200,
	'a 16 KB cookie: 200');
is(status(get('/page', ua => "Mozilla/5.0 Chrome/131 $long", port => 8081)), 400,
	'with nginx\'s default buffers, nginx answers 400 first');

# 10,000 query parameters
my $many = join '&', ('a') x 10000;
is(status(get("/glam/browse?$many", ua => BROWSER)), 200,
	'10,000 parameters, no facet, a browser: 200');
is(status(get("/glam/browse?$many", ua => SELF_DECLARED_BOT)), 429,
	'10,000 parameters, a crawler: 429 (facet-crawler-params)');
is(status(get("/glam/browse?$many&subjects=1&places=2", ua => BROWSER)), 429,
	'10,000 parameters and two facets: 429');

# NUL bytes and broken percent-encoding
is(status(get('/glam/browse?subjects%00=1&pl%00aces=2', ua => BROWSER)), 200,
	'NUL bytes in parameter names: read as PHP does (subjects, pl), one facet, 200');
is(status(get('/glam/browse?subjects=%zz&places=%', ua => BROWSER)), 429,
	'broken percent-encoding in values: two facets, 429');
is(status(get('/glam/browse?%zzsubjects=1&%=2&%%=3', ua => BROWSER)), 200,
	'broken percent-encoding in names: kept as sent, no facet, 200');
is(status(get('/page%00x', ua => BROWSER)), 400, 'a NUL byte in the path: nginx answers 400');
is(status(raw("GET /page HTTP/1.0\x0d\x0aUser-Agent: Googlebot\x00/2.1\x0d\x0a\x0d\x0a")), 400,
	'a raw NUL byte in the User-Agent: nginx answers 400');

# HTTP/1.0 without Host
is(status(raw("GET /page HTTP/1.0\x0d\x0aUser-Agent: ${\ BROWSER}\x0d\x0a\x0d\x0a")), 200,
	'HTTP/1.0 without Host, a browser: 200');
is(status(raw("GET /page HTTP/1.0\x0d\x0aUser-Agent: GPTBot/1.2\x0d\x0a\x0d\x0a")), undef,
	'HTTP/1.0 without Host, GPTBot: 444');

# pipelined: each request its own decision, on one connection
my $p = raw(join '',
	"GET /page HTTP/1.1\x0d\x0aHost: localhost\x0d\x0aUser-Agent: ${\ BROWSER}\x0d\x0a\x0d\x0a",
	"GET /glam/browse?subjects=1&places=2 HTTP/1.1\x0d\x0aHost: localhost\x0d\x0aUser-Agent: ${\ BROWSER}\x0d\x0a\x0d\x0a",
	"GET /robots.txt HTTP/1.1\x0d\x0aHost: localhost\x0d\x0aUser-Agent: ${\ SELF_DECLARED_BOT}\x0d\x0a\x0d\x0a",
	"GET /page HTTP/1.1\x0d\x0aHost: localhost\x0d\x0aUser-Agent: GPTBot/1.2\x0d\x0aConnection: close\x0d\x0a\x0d\x0a");
is(join(' ', $p =~ m!^HTTP/1\.1 (\d{3})!mg), '200 429 200',
	'pipelined: 200, the facet guard\'s 429, robots.txt 200, then GPTBot closes the connection');
like($p, qr/crawlward test page\n\z|\n\z/, 'pipelined: the replies end cleanly');

###############################################################################
