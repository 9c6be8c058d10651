# catalogue.yaml layer 1, the bot-blocker: every family heratio.org's guide refuses gets 444, the allowlist and people get the page, machine doors let scripts in but not AI-training crawlers.

use warnings;
use strict;

use Test::More;


use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

# heratio.org's guide: refused outright, with realistic User-Agent strings
my @refused = (
	# bulk AI-training crawlers
	[ GPTBot => 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
		. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)' ],
	[ ClaudeBot => 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
		. 'compatible; ClaudeBot/1.0; +claudebot@anthropic.com)' ],
	[ 'anthropic-ai' => 'Mozilla/5.0 (compatible; anthropic-ai/1.0; '
		. '+http://www.anthropic.com/bot.html)' ],
	[ CCBot => 'CCBot/2.0 (https://commoncrawl.org/faq/)' ],
	[ Amazonbot => 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
		. 'compatible; Amazonbot/0.1; '
		. '+https://developer.amazon.com/support/amazonbot) '
		. 'Chrome/119.0.6045.214 Safari/537.36' ],
	[ Bytespider => 'Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 '
		. '(KHTML, like Gecko) Mobile Safari/537.36 (compatible; '
		. 'Bytespider; spider-feedback@bytedance.com)' ],
	[ 'meta-externalagent' => 'meta-externalagent/1.1 '
		. '(+https://developers.facebook.com/docs/sharing/webmasters/crawler)' ],

	# aggressive SEO crawlers
	[ AhrefsBot => 'Mozilla/5.0 (compatible; AhrefsBot/7.0; '
		. '+http://ahrefs.com/robot/)' ],
	[ SemrushBot => 'Mozilla/5.0 (compatible; SemrushBot/7~bl; '
		. '+http://www.semrush.com/bot.html)' ],
	[ MJ12bot => 'Mozilla/5.0 (compatible; MJ12bot/v1.4.8; '
		. 'http://mj12bot.com/)' ],
	[ DotBot => 'Mozilla/5.0 (compatible; DotBot/1.2; '
		. '+https://opensiteexplorer.org/dotbot; help@moz.com)' ],
	[ PetalBot => 'Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 '
		. '(KHTML, like Gecko) Mobile Safari/537.36 (compatible; '
		. 'PetalBot;+https://webmaster.petalsearch.com/site/petalbot)' ],

	# vulnerability scanners
	[ sqlmap => 'sqlmap/1.8.2#stable (https://sqlmap.org)' ],
	[ Nikto => 'Mozilla/5.00 (Nikto/2.5.0) (Evasions:None) (Test:000001)' ],
	[ zgrab => 'Mozilla/5.0 zgrab/0.x' ],

	# default User-Agents of scripting libraries
	[ 'python-requests' => 'python-requests/2.31.0' ],
	[ 'Python-urllib' => 'Python-urllib/3.11' ],
	[ 'python-httpx' => 'python-httpx/0.27.0' ],
	[ 'node-fetch' => 'node-fetch/1.0 (+https://github.com/bitinn/node-fetch)' ],
	[ axios => 'axios/1.6.8' ],
	[ 'Go-http-client' => 'Go-http-client/1.1' ],
	[ Java => 'Java/17.0.9' ],
	# command-line clients are scripting too (robots.txt and the machine doors still answer them)
	[ curl => 'curl/8.5.0' ],
	[ Wget => 'Wget/1.21.4' ],
);

# heratio.org's guide: deliberately allowed
my @allowed = (
	[ Googlebot => 'Mozilla/5.0 (compatible; Googlebot/2.1; '
		. '+http://www.google.com/bot.html)' ],
	[ bingbot => 'Mozilla/5.0 (compatible; bingbot/2.0; '
		. '+http://www.bing.com/bingbot.htm)' ],
	[ Applebot => 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) '
		. 'AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 '
		. 'Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)' ],
	[ DuckDuckBot => 'DuckDuckBot/1.1; '
		. '(+http://duckduckgo.com/duckduckbot.html)' ],
	[ 'archive.org_bot' => 'Mozilla/5.0 (compatible; archive.org_bot '
		. '+http://archive.org/details/archive.org_bot)' ],
	[ 'OAI-SearchBot' => 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like '
		. 'Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot' ],
	[ facebookexternalhit => 'facebookexternalhit/1.1 '
		. '(+http://www.facebook.com/externalhit_uatext.php)' ],
	[ Chrome => BROWSER ],
);

my @doors = ('/api/v1/records', '/api/v2/x', '/oai?verb=Identify',
	'/resourcesync/x', '/sitemap.xml',
	# behind Laravel's front controller (site.front_controller), the same doors
	'/index.php/api/v1/records', '/index.php/oai?verb=Identify');

my %ua = map { $_->[0] => $_->[1] } @refused, @allowed;

# allowlisted crawlers whose operators publish ranges (the shipped snapshot)
my @spoofable = qw/ Googlebot Applebot DuckDuckBot OAI-SearchBot /;

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(@refused + 2 + 1 + 3 * @allowed + @spoofable + 2 * @doors + 1 + 3 + 5 + 3 + 3 + 3 + 1);

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

# every refused family, on an ordinary page
for my $u (@refused) {
	is(get('/record/1', ua => $u->[1]), '', "$u->[0]: 444 on a page");
}

is(get('/record/1', ua => undef), '', 'no User-Agent header: 444');
is(get('/record/1', ua => ''), '', 'empty User-Agent header: 444');

# patterns match case-insensitively
is(get('/record/1', ua => 'Mozilla/5.0 (compatible; gptbot/1.2)'), '',
	'lower-case gptbot: 444');

# the allowlist and people get the page, with no Retry-After; crawlers whose
# operators publish ranges come from them (t/ranges/ puts them at 127.0.0.2)
for my $u (@allowed) {
	my $r = get('/record/1', ua => $u->[1], from => '127.0.0.2');
	is(status($r), 200, "$u->[0]: 200 on a page");
	is(body($r), PAGE, "$u->[0]: the page body");
	is(header($r, 'Retry-After'), undef, "$u->[0]: no Retry-After");
}

# the same claims from outside the published ranges are spoofed: 444
for my $name (@spoofable) {
	is(get('/record/1', ua => $ua{$name}, from => '127.0.0.3'), '',
		"$name from outside its published ranges: 444");
}

# machine doors: a scripting User-Agent gets through there, not on a page
for my $uri (@doors) {
	my $r = get($uri, ua => $ua{'python-requests'});
	is(status($r), 200, "python-requests on door $uri: 200");
	is(body($r), PAGE, "python-requests on door $uri: the page body");
}

is(get('/record/1', ua => $ua{'python-requests'}), '',
	'python-requests on /record/1 (not a door): 444');

# ... but AI-training crawlers stay refused on the doors
is(get('/api/v1/', ua => $ua{GPTBot}), '', 'GPTBot on /api/v1/: 444');
is(get('/oai?verb=ListRecords', ua => $ua{ClaudeBot}), '',
	'ClaudeBot on /oai: 444');
is(get('/sitemap.xml', ua => $ua{CCBot}), '', 'CCBot on /sitemap.xml: 444');

# and may read robots.txt only
my $robots = rendered_file($t, 'robots.txt');

my $r = get('/robots.txt', ua => $ua{GPTBot});
is(status($r), 200, 'GPTBot on /robots.txt: 200');
is(body($r), $robots, 'GPTBot on /robots.txt: the rendered robots.txt');
like(header($r, 'Content-Type'), qr!^text/plain; charset=utf-8$!,
	'robots.txt is text/plain in utf-8');
like($robots, qr/^User-agent: GPTBot\n(?:User-agent: \S+\n)*Disallow: \/\n/m,
	'robots.txt asks GPTBot to stay away');
like($robots, qr/\nSitemap: https:\/\/heratio\.org\/sitemap\.xml\n?\z/,
	'robots.txt ends with the sitemap');

# the check in heratio.org's guide: curl -A "python-requests/2.31" .../robots.txt answers 200
$r = get('/robots.txt', ua => 'python-requests/2.31');
is(status($r), 200, 'python-requests/2.31 on /robots.txt: 200');
is(body($r), $robots, 'python-requests/2.31 on /robots.txt: robots.txt');

# robots.txt is answered even without a User-Agent
is(status(get('/robots.txt', ua => undef)), 200,
	'no User-Agent on /robots.txt: 200');

# only /robots.txt itself is open to everyone: the door is matched
# case-sensitively, as "location = /robots.txt" and crawlward explain are
# (a map's plain string keys would not be)
is(get('/ROBOTS.TXT', ua => $ua{GPTBot}), '', 'GPTBot on /ROBOTS.TXT: 444');
is(get('/Robots.txt', ua => $ua{'python-requests'}), '',
	'python-requests on /Robots.txt: 444');
is(get('/robots.TXT', ua => undef), '', 'no User-Agent on /robots.TXT: 444');
# robots.txt behind the front controller is the application's page, and a
# newline after it (%0A) is another path: neither is robots.txt's open door
is(get('/index.php/robots.txt', ua => $ua{GPTBot}), '', 'GPTBot on /index.php/robots.txt: 444');
is(get('/robots.txt%0A', ua => $ua{GPTBot}), '', 'GPTBot on /robots.txt%0A: 444');
is(get('/index.php/api/v1/records', ua => $ua{GPTBot}), '', 'GPTBot on /index.php/api/v1/: 444');

# 444 is not a 429 or a 503: nothing in the throttle log
is(scalar(log_lines($t)), 0, 'the bot-blocker writes no throttle log line');

###############################################################################
