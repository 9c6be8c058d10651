# forge.yaml behind a trusted proxy: AI-training crawlers get 403, SEO crawlers and empty User-Agents get the throttle class (60r/m burst 6) keyed on the forwarded address, scripts pass, robots.txt lists the deep paths.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
	. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)';
my $AHREFS = 'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)';
my $SQLMAP = 'sqlmap/1.8.2#stable (https://sqlmap.org)';

my @deep = qw{ /*/*/blob/ /*/*/raw/ /*/*/commits/ /*/*/commit/ /*/*/blame/
	/*/*/compare/ /*/*/diff/ /*/*/tree/ /*/*/tree$ /*/*/history/ };

my $t = Test::Nginx->new()
	->has(qw/http rewrite map limit_req realip/)->plan(41 + @deep);

my $dir = render($t, 'nginx-conf/forge.yaml');
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

# statuses of n requests through the trusted proxy (127.0.0.1)
sub statuses {
	my ($n, $uri, %o) = @_;
	return join ' ', map { status(get($uri, %o)) // 'none' } 1 .. $n;
}

# ai-training: block-403, for the real GPTBot (t/ranges/ puts OpenAI's
# crawlers at 127.0.0.2, forwarded by the trusted proxy)
my $r = get('/owner/repo', ua => $GPTBOT, xff => '127.0.0.2');
is(status($r), 403, 'GPTBot: 403');
is(header($r, 'Retry-After'), undef, 'GPTBot 403: no Retry-After');
is(status(get('/api/v1/repos', ua => $GPTBOT, xff => '127.0.0.2')), 403,
	'GPTBot on the /api/v1/ door: 403');

$r = get('/robots.txt', ua => $GPTBOT, xff => '127.0.0.2');
is(status($r), 200, 'GPTBot on /robots.txt: 200');

# a GPTBot claim from outside OpenAI's ranges is spoofed: the forge throttles those
is(status(get('/owner/repo', ua => $GPTBOT, xff => '192.0.2.1')), 200,
	'spoofed GPTBot: throttled, not refused');

# scanner: block, with the default status 444
is(get('/owner/repo', ua => $SQLMAP, xff => '192.0.2.2'), '', 'sqlmap: 444');

# seo: throttle, 60r/m burst 6, per forwarded address
is(statuses(7, '/owner/repo/commits', ua => $AHREFS, xff => '192.0.2.10'),
	join(' ', (200) x 7), 'AhrefsBot from 192.0.2.10: 1 + burst 6 answer 200');

$r = get('/owner/repo/commits', ua => $AHREFS, xff => '192.0.2.10');
is(status($r), 429, 'AhrefsBot from 192.0.2.10: the 8th answers 429');
is(header($r, 'Retry-After'), '60', 'AhrefsBot 429: Retry-After 60');

$r = get('/owner/repo/commits', ua => $AHREFS, xff => '192.0.2.11');
is(status($r), 200, 'AhrefsBot from 192.0.2.11: 200 (another key)');
is(body($r), PAGE, 'AhrefsBot from 192.0.2.11: the page');

# the forwarded address is the key, even behind a chain of proxies
$r = get('/owner/repo/commits', ua => $AHREFS,
	xff => '192.0.2.10, 127.0.0.1');
is(status($r), 429, 'AhrefsBot, X-Forwarded-For "192.0.2.10, 127.0.0.1": 429');

# a header from an untrusted client is not: 127.0.0.2 is not a proxy
$r = get('/owner/repo/commits', ua => $AHREFS, xff => '192.0.2.10',
	from => '127.0.0.2');
is(status($r), 200, 'AhrefsBot from untrusted 127.0.0.2 claiming 192.0.2.10: 200');

# the throttle class is its own: a person from the throttled address passes
$r = get('/owner/repo/commits', ua => BROWSER, xff => '192.0.2.10');
is(status($r), 200, 'browser from 192.0.2.10: 200 (default class)');

# empty: throttle, the same class
is(statuses(7, '/owner/repo/blob/main/README', ua => '', xff => '192.0.2.20'),
	join(' ', (200) x 7), 'empty User-Agent from 192.0.2.20: 7 answer 200');

$r = get('/owner/repo/blob/main/README', ua => '', xff => '192.0.2.20');
is(status($r), 429, 'empty User-Agent from 192.0.2.20: the 8th answers 429');
is(header($r, 'Retry-After'), '60', 'empty User-Agent 429: Retry-After 60');

is(statuses(7, '/owner/repo', ua => undef, xff => '192.0.2.21'),
	join(' ', (200) x 7), 'no User-Agent from 192.0.2.21: 7 answer 200');

$r = get('/owner/repo', ua => undef, xff => '192.0.2.21');
is(status($r), 429, 'no User-Agent from 192.0.2.21: the 8th answers 429');
is(header($r, 'Retry-After'), '60', 'no User-Agent 429: Retry-After 60');

# the throttle class counts per address, not per agent: AhrefsBot and an
# empty User-Agent share 192.0.2.22's budget
is(statuses(4, '/owner/repo', ua => $AHREFS, xff => '192.0.2.22')
	. ' ' . statuses(3, '/owner/repo', ua => '', xff => '192.0.2.22'),
	join(' ', (200) x 7), '192.0.2.22: 4 AhrefsBot + 3 empty answer 200');
is(status(get('/owner/repo', ua => '', xff => '192.0.2.22')), 429,
	'192.0.2.22: the 8th throttled request answers 429');

# scripting: allow, in the default class (120r/m burst 60)
is(statuses(10, '/owner/repo/raw/main/x', ua => 'python-requests/2.31.0',
	xff => '192.0.2.30'), join(' ', (200) x 10),
	'python-requests from 192.0.2.30: 10 answer 200, not throttled');
$r = get('/owner/repo', ua => 'python-requests/2.31.0', xff => '192.0.2.30');
is(body($r), PAGE, 'python-requests: the page');
is(status(get('/owner/repo', ua => 'git/2.43.0', xff => '192.0.2.31')), 200,
	'git/2.43.0: 200');

# the throttle log

my @lines = wait_log($t, qr/ refusal=rate /, 5);
is(scalar @lines, 5, 'five rate lines in the throttle log');
is(scalar(log_lines($t)), 5, 'and nothing else (403 and 444 are not logged)');

like($lines[0] // '', qr!^192\.0\.2\.10 \[[^]]+\] "GET /owner/repo/commits HTTP/1\.0" 429 !,
	'AhrefsBot line: the forwarded address');
like($lines[0] // '', qr/ agent="AhrefsBot" purpose=seo verdict=spoofed action=throttle refusal=rate facet= class=throttle /,
	'AhrefsBot line: seo, spoofed (Ahrefs publishes ranges), throttle, class throttle');
like($lines[2] // '', qr!^192\.0\.2\.20 .* 429 agent="" purpose= verdict=empty action=throttle refusal=rate facet= class=throttle !,
	'empty User-Agent line: verdict empty, class throttle');
like($lines[2] // '', qr/ ua=""$/, 'empty User-Agent line: ua ""');
like($lines[3] // '', qr!^192\.0\.2\.21 .* verdict=empty .* class=throttle .* ua="-"$!,
	'no User-Agent line: verdict empty, ua "-"');

# robots.txt

my $robots = rendered_file($t, 'robots.txt');

$r = get('/robots.txt', ua => BROWSER, xff => '192.0.2.40');
is(status($r), 200, 'robots.txt: 200');
is(body($r), $robots, 'robots.txt: the rendered file');
like(header($r, 'Content-Type'), qr!^text/plain; charset=utf-8$!,
	'robots.txt: text/plain in utf-8');

my ($star) = $robots =~ /^User-agent: \*\n((?:[^\n]+\n)+)/m;
$star //= '';

for my $p (@deep) {
	like($star, qr/^Disallow: \Q$p\E\n/m, "robots.txt * group: Disallow $p");
}

like($star, qr/^Disallow: \/origins\/\n/m, 'robots.txt: Disallow /origins/');
like($star, qr/^Crawl-delay: 10\n/m, 'robots.txt: Crawl-delay 10');
like($robots, qr/^User-agent: GPTBot\n(?:User-agent: \S+\n)*Disallow: \/\n/m,
	'robots.txt: GPTBot group disallows everything');
like($robots, qr/^# Contact: mailto:crawlers\@forge\.example\.org\n/m,
	'robots.txt: contact');
unlike($robots, qr/^User-agent: AhrefsBot\n/m,
	'robots.txt: no group for throttled AhrefsBot');
like($robots, qr/\nSitemap: https:\/\/forge\.example\.org\/sitemap\.xml\n?\z/,
	'robots.txt ends with the Sitemap line');

###############################################################################
