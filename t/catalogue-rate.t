# catalogue.yaml layer 4, the per-address rate classes: search (20r/m burst 10) and api_v1 (60r/m burst 20) answer 429 with Retry-After 60 past the burst, per socket address.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

use Time::HiRes qw/ time /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(29);

my $dir = render($t, 'nginx-conf/catalogue.yaml');
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

# limit_req burst=N nodelay: the first request and N more pass at once, the
# next is refused.  The search class leaks one request every 3 s, so the
# boundary is exact as long as the burst is sent within 3 s (it takes ms).

# n requests from one address; the statuses
sub burst {
	my ($n, $uri, %o) = @_;
	my @st;
	my $start = time();
	push @st, status(get($uri, ua => BROWSER, %o)) // 'none' for 1 .. $n;
	note(sprintf("%d requests to %s from %s took %.3fs", $n, $uri,
		$o{from} // '127.0.0.1', time() - $start));
	return @st;
}

my @st = burst(11, '/search?q=letters', from => '127.0.0.2');
is(join(' ', @st), join(' ', (200) x 11),
	'search from 127.0.0.2: 1 + burst 10 answer 200');

my $r = get('/search?q=letters', ua => BROWSER, from => '127.0.0.2');
is(status($r), 429, 'search from 127.0.0.2: the 12th answers 429');
is(header($r, 'Retry-After'), '60', 'search 429: Retry-After 60');

# /glam/search is the same class, same key
$r = get('/glam/search?q=letters', ua => BROWSER, from => '127.0.0.2');
is(status($r), 429, '/glam/search from 127.0.0.2: 429 (same class)');
is(header($r, 'Retry-After'), '60', '/glam/search 429: Retry-After 60');

# and behind Laravel's front controller (site.front_controller) it is the same page
$r = get('/index.php/search?q=letters', ua => BROWSER, from => '127.0.0.2');
is(status($r), 429, '/index.php/search from 127.0.0.2: 429 (same class)');
is(header($r, 'Retry-After'), '60', '/index.php/search 429: Retry-After 60');

# other classes of the same address are not spent
$r = get('/record/1', ua => BROWSER, from => '127.0.0.2');
is(status($r), 200, 'a record page from 127.0.0.2: 200 (default class)');
is(header($r, 'Retry-After'), undef, 'record page 200: no Retry-After');

# keys are socket addresses
$r = get('/search?q=letters', ua => BROWSER, from => '127.0.0.3');
is(status($r), 200, 'search from 127.0.0.3: 200');
is(body($r), PAGE, 'search from 127.0.0.3: the page');

# a client header is not the key (catalogue.yaml trusts no proxy)
$r = get('/search?q=letters', ua => BROWSER, from => '127.0.0.2',
	xff => '192.0.2.7');
is(status($r), 429, 'search from 127.0.0.2 with X-Forwarded-For: still 429');

# REST v1 (heratio.org's guide: 60 a minute per address), burst 20
@st = burst(21, '/api/v1/records', from => '127.0.0.4');
is(join(' ', @st), join(' ', (200) x 21),
	'api/v1 from 127.0.0.4: 1 + burst 20 answer 200');

$r = get('/api/v1/records', ua => BROWSER, from => '127.0.0.4');
is(status($r), 429, 'api/v1 from 127.0.0.4: the 22nd answers 429');
is(header($r, 'Retry-After'), '60', 'api/v1 429: Retry-After 60');

# a scripting client on the door is counted the same way
$r = get('/api/v1/records', ua => 'python-requests/2.31.0', from => '127.0.0.4');
is(status($r), 429, 'api/v1 from 127.0.0.4, python-requests: 429');

# the default class: 120r/m burst 60
@st = burst(61, '/record/1', from => '127.0.0.5');
is(join(' ', @st), join(' ', (200) x 61),
	'record pages from 127.0.0.5: 1 + burst 60 answer 200');

$r = get('/record/2', ua => BROWSER, from => '127.0.0.5');
is(status($r), 429, 'record page from 127.0.0.5: the 62nd answers 429');
is(header($r, 'Retry-After'), '60', 'default class 429: Retry-After 60');

# the throttle log

my @lines = wait_log($t, qr/ refusal=rate /, 7);
is(scalar @lines, 7, 'seven rate lines in the throttle log');
is(scalar(log_lines($t)), 7, 'and nothing else');

my @search = grep { / class=search / } @lines;
my @api = grep { / class=api_v1 / } @lines;
is(scalar @search, 4, 'four lines for class search');
is(scalar @api, 2, 'two lines for class api_v1');

my @default = grep { / class=default / } @lines;
like($default[0] // '', qr!^127\.0\.0\.5 .*"GET /record/2 HTTP/1\.0" 429 .* refusal=rate facet= class=default !,
	'default class line');

like($search[0], qr!^127\.0\.0\.2 \[[^]]+\] "GET /search\?q=letters HTTP/1\.0" 429 !,
	'search line: address, request, status');
like($search[0], qr/ agent="" purpose= verdict=none action=allow refusal=rate facet= class=search /,
	'search line: verdict none, refusal rate, class search');
like($search[2], qr/^127\.0\.0\.2 .* 429 .* class=search /,
	'X-Forwarded-For line: logged under the socket address');
like($api[1], qr/ 429 agent="python-requests" purpose=scripting verdict=unverified action=allow refusal=rate facet= class=api_v1 /,
	'api line: python-requests on the door, class api_v1');
like($api[1], qr/ua="python-requests\/2\.31\.0"$/, 'api line: the User-Agent');

###############################################################################
