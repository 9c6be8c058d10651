# ngx_http_crawlward_module with t/policies/module.yaml rendered: verified, spoofed, unverified, none and empty User-Agents each get the action the policy names, with the variables and the error.log line to match; machine doors and robots.txt.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################


select STDERR; $| = 1;
select STDOUT; $| = 1;

my %UA = (
	Googlebot => 'Mozilla/5.0 (compatible; Googlebot/2.1; '
		. '+http://www.google.com/bot.html)',
	bingbot => 'Mozilla/5.0 (compatible; bingbot/2.0; '
		. '+http://www.bing.com/bingbot.htm)',
	DuckDuckBot => 'DuckDuckBot/1.1; '
		. '(+http://duckduckgo.com/duckduckbot.html)',
	MojeekBot => 'Mozilla/5.0 (compatible; MojeekBot/0.11; '
		. '+https://www.mojeek.com/bot.html)',
	AhrefsBot => 'Mozilla/5.0 (compatible; AhrefsBot/7.0; '
		. '+http://ahrefs.com/robot/)',
	SemrushBot => 'Mozilla/5.0 (compatible; SemrushBot/7~bl; '
		. '+http://www.semrush.com/bot.html)',
	GPTBot => 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
		. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)',
	'python-requests' => 'python-requests/2.31.0',
);

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(63);

my $dir = render($t, 't/policies/module.yaml');
my $d = $t->testdir();
write_page($t);
$t->write_file('www/notfound.html', "not found\n");

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

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
            add_header X-UA "\$http_user_agent" always;
        }

        # a front controller: try_files hands the request on to /index.php
        location /api/v1/front/ {
            try_files /nonexistent /index.php;
        }

        location = /index.php {
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
        }

        # a custom 404 page
        location /api/v1/gone/ {
            root $d/www;
            try_files \$uri =404;
            error_page 404 /notfound.html;
        }

        location = /notfound.html {
            root $d/www;
        }

        location /open/ {
            crawlward off;
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
        }
    }
}

EOF

$t->run();

###############################################################################

# the rendered snippets load the module's catalogue and turn it on
like(rendered_file($t, 'crawlward-http.conf'),
	qr!^crawlward_catalogue \Q$dir\E/crawlward-catalogue\.json;\ncrawlward_zone zone=crawlward:4m;$!m,
	'http snippet: crawlward_catalogue and crawlward_zone');
like(rendered_file($t, 'crawlward-server.conf'), qr/^crawlward on;$/m,
	'server snippet: crawlward on');

# Googlebot, inside and outside its ranges

my $r = get('/page', ua => $UA{Googlebot}, from => '127.0.0.2');
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'Googlebot from 127.0.0.2: 200');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'Googlebot from 127.0.0.2: verified, allow');
is(body($r), PAGE, 'Googlebot from 127.0.0.2: the page');

is(get('/page', ua => $UA{Googlebot}, from => '127.0.0.3'), '',
	'Googlebot from 127.0.0.3: 444, closed without a reply');
my @l = wait_error_log($t,
	qr/\[info\] .*crawlward: refused with 444: agent "Googlebot", verdict spoofed, client: 127\.0\.0\.3, server: localhost, request: "GET \/page HTTP\/1\.0"/);
is(scalar @l, 1, 'Googlebot from 127.0.0.3: the info line in error.log');

# the same address is Googlebot's only with Googlebot's User-Agent
$r = get('/page', ua => BROWSER, from => '127.0.0.2');
is(status($r), 200, 'browser from 127.0.0.2: 200');
is(header($r, 'X-Crawlward'), '|||none|allow',
	'browser from 127.0.0.2: verdict none');

# bingbot: ranges from the policy

$r = get('/page', ua => $UA{bingbot}, from => '127.0.0.4');
is(status($r), 200, 'bingbot from 127.0.0.4: 200');
is(header($r, 'X-Crawlward'), 'bingbot|Microsoft|search|verified|allow',
	'bingbot from 127.0.0.4: verified');

is(get('/page', ua => $UA{bingbot}, from => '127.0.0.2'), '',
	'bingbot from Googlebot\'s 127.0.0.2: 444');

# DuckDuckBot: published ranges (t/ranges/ puts them at 127.0.0.2)

$r = get('/page', ua => $UA{DuckDuckBot}, from => '127.0.0.2');
is(status($r), 200, 'DuckDuckBot from 127.0.0.2: 200');
is(header($r, 'X-Crawlward'),
	'DuckDuckBot|DuckDuckGo|search|verified|allow',
	'DuckDuckBot from 127.0.0.2: verified, allow');

is(get('/page', ua => $UA{DuckDuckBot}, from => '127.0.0.5'), '',
	'DuckDuckBot from 127.0.0.5: 444');

# MojeekBot: no ranges, so unverified, and search is allowed

$r = get('/page', ua => $UA{MojeekBot}, from => '127.0.0.5');
is(status($r), 200, 'MojeekBot: 200');
is(header($r, 'X-Crawlward'), 'MojeekBot|Mojeek|search|unverified|allow',
	'MojeekBot: unverified, allow');

# seo is block-403 in this policy: SemrushBot (no ranges) and a verified
# AhrefsBot get 403; an AhrefsBot outside Ahrefs' ranges is spoofed: 444

$r = get('/page', ua => $UA{SemrushBot}, from => '127.0.0.5');
like($r, qr!^HTTP/1\.1 403 Forbidden\x0d\x0a!, 'SemrushBot: 403');
is(header($r, 'X-Crawlward'), 'SemrushBot|Semrush|seo|unverified|block-403',
	'SemrushBot: unverified, block-403');
like(body($r), qr!<title>403 Forbidden</title>!, 'SemrushBot: nginx\'s 403 page');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 403: agent "SemrushBot", verdict unverified, client: 127\.0\.0\.5,/)),
	1, 'SemrushBot: the info line in error.log');

$r = get('/page', ua => $UA{AhrefsBot}, from => '127.0.0.2');
like($r, qr!^HTTP/1\.1 403 Forbidden\x0d\x0a!, 'AhrefsBot from 127.0.0.2: 403');
is(header($r, 'X-Crawlward'), 'AhrefsBot|Ahrefs|seo|verified|block-403',
	'AhrefsBot from 127.0.0.2: verified, block-403');

is(get('/page', ua => $UA{AhrefsBot}, from => '127.0.0.5'), '',
	'AhrefsBot from 127.0.0.5: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "AhrefsBot", verdict spoofed, client: 127\.0\.0\.5,/)),
	1, 'AhrefsBot from 127.0.0.5: spoofed in error.log');

# GPTBot: ai-training is block-444, verified or not

is(get('/page', ua => $UA{GPTBot}), '', 'GPTBot: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "GPTBot", verdict spoofed, client: 127\.0\.0\.1,/)),
	1, 'GPTBot: the info line in error.log');

is(get('/page', ua => $UA{GPTBot}, from => '127.0.0.2'), '',
	'GPTBot from 127.0.0.2 (verified): 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "GPTBot", verdict verified, client: 127\.0\.0\.2,/)),
	1, 'GPTBot from 127.0.0.2: verified in error.log');

# a person

$r = get('/page', ua => BROWSER);
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'Chrome: 200');
is(header($r, 'X-Crawlward'), '|||none|allow', 'Chrome: no agent, none, allow');
is(header($r, 'X-UA'), BROWSER, 'Chrome: X-UA is the User-Agent');
is(body($r), PAGE, 'Chrome: the page');

# no User-Agent, and an empty one

is(get('/page', ua => undef), '', 'no User-Agent: 444');
is(get('/page', ua => ''), '', 'empty User-Agent: 444');
is(get('/page', ua => '   '), '', 'User-Agent of spaces: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "-", verdict empty, client: 127\.0\.0\.1,/, 3)),
	3, 'no and empty User-Agents: three info lines, agent "-", verdict empty');

# machine doors: scripts are let in, AI-training crawlers are not

$r = get('/api/v1/x', ua => $UA{'python-requests'});
is(status($r), 200, 'python-requests on /api/v1/x: 200');
is(header($r, 'X-Crawlward'),
	'python-requests|unknown (Python library)|scripting|unverified|allow',
	'python-requests on /api/v1/x: allow');
is(get('/x', ua => $UA{'python-requests'}), '', 'python-requests on /x: 444');
is(get('/api/v1', ua => $UA{'python-requests'}), '',
	'python-requests on /api/v1 (not under the door): 444');

$r = get('/api/v1/x', ua => undef);
is(status($r), 200, 'no User-Agent on /api/v1/x: 200');
is(header($r, 'X-Crawlward'), '|||empty|allow',
	'no User-Agent on /api/v1/x: verdict empty, allow');

is(get('/api/v1/x', ua => $UA{GPTBot}), '', 'GPTBot on /api/v1/x: 444');
is(status(get('/api/v1/x', ua => $UA{Googlebot}, from => '127.0.0.3')), 200,
	'spoofed Googlebot on /api/v1/x: 200');

# a machine door served through an internal redirect (try_files to a front
# controller, error_page): the door is the one the client asked for, as with
# the rendered maps of stock nginx, which decide once on the original $uri

$r = get('/api/v1/front/x', ua => $UA{'python-requests'});
is(status($r), 200,
	'python-requests on /api/v1/front/x (try_files to /index.php): 200');
is(body($r), PAGE, '... the page from /index.php');

$r = get('/api/v1/gone/x', ua => $UA{'python-requests'});
is(status($r), 404,
	'python-requests on /api/v1/gone/x (error_page 404 /notfound.html): 404');
is(body($r), "not found\n", '... the custom 404 page');

is(get('/api/v1/front/x', ua => $UA{GPTBot}), '',
	'GPTBot on /api/v1/front/x: 444');
is(status(get('/api/v1/front/x', ua => BROWSER)), 200,
	'browser on /api/v1/front/x: 200');

# robots.txt is open to all

$r = get('/robots.txt', ua => $UA{GPTBot});
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'GPTBot on /robots.txt: 200');
like(header($r, 'Content-Type'), qr!^text/plain!, 'robots.txt: text/plain');
is(body($r), rendered_file($t, 'robots.txt'),
	'GPTBot on /robots.txt: the rendered robots.txt');
like(body($r), qr/^User-agent: GPTBot\n(?:User-agent: \S+\n)*Disallow: \/$/m,
	'robots.txt: GPTBot disallowed');
is(status(get('/robots.txt', ua => undef)), 200, 'no User-Agent on /robots.txt: 200');

# "crawlward off" in a location: no refusal, the variables still work

$r = get('/open/x', ua => $UA{GPTBot}, from => '127.0.0.2');
is(status($r), 200, 'GPTBot under "crawlward off": 200');
is(header($r, 'X-Crawlward'), 'GPTBot|OpenAI|ai-training|verified|block-444',
	'GPTBot under "crawlward off": the variables still say block-444');

# case does not matter in the User-Agent

is(get('/page', ua => 'gptbot/1.2'), '', 'gptbot in lower case: 444');

# the error.log: one refusal line per refused request, all at info level

my @refused = error_log_lines($t, qr/crawlward: refused/);
my @redirected = grep { /agent "python-requests".*"GET \/api\/v1\/(?:front|gone)\// }
	@refused;
is(scalar(@refused) - scalar(@redirected), 16,
	'sixteen refusal lines in error.log, besides the redirected doors');
is(join("\n", @redirected), '', 'none for python-requests on the redirected doors');
is(scalar(grep { !/ \[info\] / } @refused), 0, 'all at info level');
is(scalar(error_log_lines($t, qr/crawlward: dry run/)), 0, 'no dry-run lines');

###############################################################################
