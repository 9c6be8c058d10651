# catalogue.yaml layer 3, the browse cap: 12 browse requests in flight site-wide, the next browse request answers 503 with Retry-After 30 at once while record pages still answer, and browse answers again once they finish.

use warnings;
use strict;

use Test::More;

use IO::Select;
use IO::Socket::INET;
use Socket qw/ CRLF /;
use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ :DEFAULT http_end /;
use Crawlward::Test;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $CAP = 12;		# browse_shed.max_in_flight in catalogue.yaml
my $HOLD_MAX = 10;	# the backend never holds a browse request longer

my $t = Test::Nginx->new()
	->has(qw/http rewrite map limit_req limit_conn proxy/)->plan(23 + $CAP);

my $dir = render($t, 'nginx-conf/catalogue.yaml');
my $d = $t->testdir();

# The backend holds browse requests until $d/release exists (at most
# $HOLD_MAX seconds) and answers everything else at once; it notes each
# request it receives in $d/backend.log.

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

        include $dir/crawlward-server.conf;

        location /glam/browse {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /actor/browse {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /record/ {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        # Laravel's front controller: /index.php/glam/browse is /glam/browse to it
        location /index.php/ {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
    }
}

EOF

$t->run_daemon(\&held_backend, port(8081), $d, $HOLD_MAX);
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start backend on port " . port(8081) . "\n";

###############################################################################

# the backend answers when the cap is not involved
my $r = get('/record/0', ua => BROWSER);
is(status($r), 200, 'record page through the backend: 200');

# $CAP browse requests, each from its own address: the per-address rate
# class has nothing to do with what follows

my @held;
for my $i (1 .. $CAP) {
	my $uri = ($i % 2 ? '/glam/browse' : '/actor/browse') . "?page=$i";
	push @held, get($uri, ua => BROWSER, from => '127.0.0.' . (10 + $i),
		start => 1);
}

my $arrived = wait_backend($d, qr/browse/, $CAP, 5);
is($arrived, $CAP, "$CAP browse requests in flight at the backend");

my $start = time();
$r = get('/glam/browse?page=99', ua => BROWSER, from => '127.0.0.40');
my $took = time() - $start;

is(status($r), 503, 'browse request past the cap: 503');
is(header($r, 'Retry-After'), '30', 'browse cap 503: Retry-After 30');
like(body($r), qr!<center>nginx(?:/[0-9.]+)?</center>!, 'browse cap 503: nginx answered');
cmp_ok($took, '<', 2, sprintf('browse cap 503: at once (%.3fs)', $took));

$r = get('/actor/browse?page=98', ua => BROWSER, from => '127.0.0.41');
is(status($r), 503, '/actor/browse past the cap: 503 (one cap for both)');
is(header($r, 'Retry-After'), '30', '/actor/browse 503: Retry-After 30');

$r = get('/index.php/glam/browse?page=97', ua => BROWSER, from => '127.0.0.42');
is(status($r), 503, '/index.php/glam/browse past the cap: 503 (site.front_controller)');
is(header($r, 'Retry-After'), '30', '/index.php/glam/browse 503: Retry-After 30');

is(wait_backend($d, qr/browse/, $CAP + 1, 0.3), $CAP,
	'the refused browse requests never reached the backend');

# a verified crawler takes no place in the cap (cap_exempt_verified, the
# default): after Google's crawler documentation, it gets a 503 only from a limit written for it
my $googlebot = get('/glam/browse?page=g', ua => 'Mozilla/5.0 (compatible; Googlebot/2.1)', from => '127.0.0.2', start => 1);
is(wait_backend($d, qr/browse/, $CAP + 1, 5), $CAP + 1,
	'verified Googlebot past the full cap: reaches the site');

# record pages are not capped
$r = get('/record/1', ua => BROWSER, from => '127.0.0.42');
is(status($r), 200, 'record page during the cap: 200');
is(body($r), "backend: /record/1\n", 'record page during the cap: its body');
is(header($r, 'Retry-After'), undef, 'record page: no Retry-After');

# let the held requests finish
$t->write_file('release', '');

for my $i (1 .. $CAP) {
	my $reply = defined $held[$i - 1] && ref $held[$i - 1]
		? http_end($held[$i - 1]) : undef;
	my $uri = ($i % 2 ? '/glam/browse' : '/actor/browse') . "?page=$i";
	is(body($reply), "backend: $uri\n", "held browse request $i: answered");
}

is(body(http_end($googlebot)), "backend: /glam/browse?page=g\n", 'verified Googlebot: answered by the site');

$r = get('/glam/browse?page=100', ua => BROWSER, from => '127.0.0.43');
is(status($r), 200, 'after the held requests: browse 200');
is(body($r), "backend: /glam/browse?page=100\n", 'after: the backend answered');
is(header($r, 'Retry-After'), undef, 'after: no Retry-After');

# the throttle log: the three 503s, nothing else

my @lines = wait_log($t, qr/ refusal=browse-cap /, 3);
is(scalar @lines, 3, 'three browse-cap lines in the throttle log');
is(scalar(log_lines($t)), 3, 'and no other line');
like($lines[0] // '', qr!^127\.0\.0\.40 \[[^]]+\] "GET /glam/browse\?page=99 HTTP/1\.0" 503 !,
	'browse-cap line: address, request, status');
like($lines[0] // '', qr/ agent="" purpose= verdict=none action=allow refusal=browse-cap /,
	'browse-cap line: verdict, action, refusal');

###############################################################################

###############################################################################
