#!/usr/bin/perl

# HTTP/2 with many streams (issue 11): every stream of a multiplexed
# connection gets its own decision from the module (the User-Agent rule, the
# facet guard, the crawl budgets), a refusal ends its stream and not the
# connection, streams past nginx's concurrency limit are refused by nginx
# and not left hanging, a 16 KB header block split into CONTINUATION frames
# is read like any other, and no worker crashes (the harness's last tests
# find no alert in the error log). With t/policies/protect.yaml and the
# tests' own HTTP/2 client (t/lib/Crawlward/HTTP2.pm).

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::HTTP2;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2)';

# RST_STREAM codes (RFC 9113 section 7)
# (nginx closes a 444's stream as if it timed out: PROTOCOL_ERROR)
use constant { PROTOCOL_ERROR => 1, REFUSED_STREAM => 7 };

my $t = Test::Nginx->new()->has(qw/http http_v2 realip map limit_conn limit_req/)
	->plan(15);

my $dir = render($t, 't/policies/protect.yaml');
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

        # room for a 16 KB User-Agent, so that it reaches the module
        large_client_header_buffers 4 64k;

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

# what each stream got: "200", "429", "reset 1" (RST_STREAM), "none" (nothing)
sub got {
	my ($st) = @_;
	return 'none' unless $st && $st->{done};
	return "reset $st->{rst}" if defined $st->{rst} && !defined $st->{status};
	return $st->{status};
}

sub tally {
	my (%done) = @_;
	my %n;
	$n{ got($_) }++ for values %done;
	return join ', ', map { "$_ x$n{$_}" } sort keys %n;
}

# 100 streams at once on one connection, four kinds of client through realip
my $h2 = Crawlward::HTTP2->new(port(8080));
my (@page, @facets, @gptbot, @spoofed);
for my $i (1 .. 25) {
	push @page, $h2->request('/page', 'user-agent' => BROWSER,
		'x-forwarded-for' => "192.0.2.$i");
	push @facets, $h2->request('/glam/browse?subjects=1&places=2',
		'user-agent' => BROWSER, 'x-forwarded-for' => "192.0.2.$i");
	push @gptbot, $h2->request('/page', 'user-agent' => $GPTBOT,
		'x-forwarded-for' => "198.51.100.$i");
	push @spoofed, $h2->request('/page', 'user-agent' => $GOOGLEBOT,
		'x-forwarded-for' => "203.0.113.$i");
}
my %done = $h2->collect([ @page, @facets, @gptbot, @spoofed ], 10);
is(tally(map { $_ => $done{$_} } @page), '200 x25', 'browser pages: 200 on each stream');
is(join('', map { $done{$_}{body} } @page), PAGE x 25, 'browser pages: each stream has the page');
is(tally(map { $_ => $done{$_} } @facets), '429 x25',
	'two facets without a Referer: the facet guard\'s 429 on each stream');
is(tally(map { $_ => $done{$_} } @gptbot), 'reset ' . PROTOCOL_ERROR . ' x25',
	'GPTBot: 444, which ends each stream with RST_STREAM and no reply');
is(tally(map { $_ => $done{$_} } @spoofed), 'reset ' . PROTOCOL_ERROR . ' x25',
	'Googlebot\'s name from outside its ranges: spoofed, 444 on each stream');
is($h2->goaway, undef, 'the refusals closed streams, not the connection');

# the same connection goes on after them
my $again = $h2->request('/glam/browse?subjects=1&places=2', 'user-agent' => BROWSER,
	'referer' => 'https://example.org/glam/browse', 'x-forwarded-for' => '192.0.2.99');
%done = $h2->collect([ $again ], 5);
is(got($done{$again}), 200, 'the connection goes on: two facets with a same-site Referer, 200');

# the crawl budget counts streams as requests: one address, 20 streams at once,
# its budget 6 a minute
my @bot = map { $h2->request('/page', 'user-agent' => SELF_DECLARED_BOT,
	'x-forwarded-for' => '192.0.2.200') } 1 .. 20;
%done = $h2->collect(\@bot, 10);
is(tally(%done), '200 x6, 429 x14',
	'a self-declared crawler, 20 streams from one address: 6 within its budget, then 429');

# a 16 KB User-Agent: a header block in HEADERS and CONTINUATION frames
my $long = 'x' x 16384;
my $big = $h2->request('/page', 'user-agent' => "Mozilla/5.0 Chrome/131 $long",
	'x-forwarded-for' => '192.0.2.50');
my $big_spoofed = $h2->request('/page', 'user-agent' => "$GOOGLEBOT $long",
	'x-forwarded-for' => '192.0.2.51');
%done = $h2->collect([ $big, $big_spoofed ], 5);
is(got($done{$big}), 200, 'a 16 KB browser User-Agent over CONTINUATION frames: 200');
is(got($done{$big_spoofed}), 'reset ' . PROTOCOL_ERROR,
	'a 16 KB User-Agent claiming Googlebot from elsewhere: 444');
$h2->close();

# more streams than nginx takes at once (http2_max_concurrent_streams, 128):
# each of 300 ends, answered or refused by nginx, none is left hanging
$h2 = Crawlward::HTTP2->new(port(8080));
my @many = map { $h2->request("/glam/browse?page=$_", 'user-agent' => BROWSER,
	'x-forwarded-for' => '192.0.2.' . (1 + $_ % 250)) } 1 .. 300;
%done = $h2->collect(\@many, 15);
my %kinds;
$kinds{ got($_) =~ /^(200|reset 7)$/ ? $1 : got($_) }++ for values %done;
is(join(', ', grep { $_ ne '200' && $_ ne 'reset ' . REFUSED_STREAM } sort keys %kinds), '',
	'300 streams at once: each answered 200 or refused (REFUSED_STREAM), none hangs');
cmp_ok($kinds{200} // 0, '>=', 128, '300 streams at once: at least the 128 nginx takes answered 200');
$h2->close();

# the counters saw every stream as a request of its own
my $st = module_status('/crawlward-status', port => 8081);
is(module_count($st, 'GPTBot', 'unverified', 'block-444')
	+ module_count($st, 'GPTBot', 'verified', 'block-444')
	+ module_count($st, 'GPTBot', 'spoofed', 'block-444'), 25,
	'the status endpoint counts 25 GPTBot refusals');
is(module_count($st, 'Googlebot', 'spoofed', 'block-444'), 26,
	'and 26 spoofed Googlebot ones');

# and the server is still there
is(status(get('/page', ua => BROWSER, port => 8081)), 200, 'an HTTP/1.0 request after the streams: 200');

###############################################################################
