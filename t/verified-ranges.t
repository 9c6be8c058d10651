# Published ranges on stock nginx (geo), with t/policies/verified.yaml: a verified Googlebot is exempt from the rate limit, a spoofed one is refused, a verified GPTBot is still refused, people are limited; the throttle log shows the verdict.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
	. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)';

# verified.yaml: default class 1r/m burst 2, so 3 requests pass at once
my $PASS = 3;
my $MORE = 8;

my $t = Test::Nginx->new()
	->has(qw/http rewrite map geo limit_req limit_conn/)->plan(33);

my $dir = render($t, 't/policies/verified.yaml');
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

sub statuses {
	my ($n, $uri, %o) = @_;
	return join ' ', map { status(get($uri, %o)) // 'none' } 1 .. $n;
}

# the rendered http snippet has the ranges in one geo, whose value names the
# lists that hold the address; each agent's claim names its own list
my $http = rendered_file($t, 'crawlward-http.conf');
my ($gb) = $http =~ /^    googlebot +"Googlebot search (\d+)";$/m;
my ($gpt) = $http =~ /^    gptbot +"GPTBot ai-training (\d+)";$/m;
my ($bing) = $http =~ /^    bingbot +"bingbot search (\d+)";$/m;
like($http, qr/^geo \$cw_ranges \{\n    default "";\n(?:    .*\n)*    127\.0\.0\.2\/32 ,(?:\d+,)*$gb,(?:\d+,)*;$/m,
	'Googlebot ranges rendered in the geo');
like($http, qr/^geo \$cw_ranges \{\n    default "";\n(?:    .*\n)*    127\.0\.0\.4\/32 ,(?:\d+,)*$gpt,(?:\d+,)*;$/m,
	'GPTBot ranges rendered in the geo');
like($http, qr/^    127\.0\.0\.2\/32 ,(?:\d+,)*$bing,(?:\d+,)*;$/m,
	'Googlebot\'s network is also in bingbot\'s wider one');

# verified Googlebot: not counted at all
is(statuses($MORE, '/record/1', ua => $GOOGLEBOT, from => '127.0.0.2'),
	join(' ', (200) x $MORE),
	"Googlebot from 127.0.0.2 (verified): $MORE of $MORE answer 200");

my $r = get('/record/2', ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 200, 'verified Googlebot: 200 once more');
is(body($r), PAGE, 'verified Googlebot: the page');
is(header($r, 'Retry-After'), undef, 'verified Googlebot: no Retry-After');

# spoofed Googlebot: outside its ranges, refused
is(get('/record/1', ua => $GOOGLEBOT, from => '127.0.0.3'), '',
	'Googlebot from 127.0.0.3 (spoofed): 444');

# bingbot's list is 127.0.0.0/24, which holds Googlebot's and GPTBot's
# networks: one geo answers for the most specific network, whose value names
# every list that holds the address
my $BINGBOT = 'Mozilla/5.0 (compatible; bingbot/2.0; '
	. '+http://www.bing.com/bingbot.htm)';
is(statuses($MORE, '/record/1', ua => $BINGBOT, from => '127.0.0.2'),
	join(' ', (200) x $MORE),
	"bingbot from 127.0.0.2, inside Googlebot's network and its own: verified, $MORE of $MORE answer 200");
is(statuses($MORE, '/record/1', ua => $BINGBOT, from => '127.0.0.9'),
	join(' ', (200) x $MORE),
	"bingbot from 127.0.0.9: verified, $MORE of $MORE answer 200");
is(get('/record/1', ua => $BINGBOT, from => '127.0.1.2'), '',
	'bingbot from 127.0.1.2 (spoofed): 444');

# ... except on a machine door, where the User-Agent rule does not apply
# (heratio.org's guide): a script claiming Googlebot is just a script there
is(status(get('/api/v1/records', ua => $GOOGLEBOT, from => '127.0.0.7')), 200,
	'spoofed Googlebot on a machine door: 200');

# verified GPTBot: genuine, but ai-training is blocked
is(get('/record/1', ua => $GPTBOT, from => '127.0.0.4'), '',
	'GPTBot from 127.0.0.4 (verified): 444');
is(get('/api/v1/records', ua => $GPTBOT, from => '127.0.0.4'), '',
	'verified GPTBot on a machine door: 444');
is(get('/record/1', ua => $GPTBOT, from => '127.0.0.6'), '',
	'GPTBot from 127.0.0.6 (spoofed): 444');

# a person: limited
is(statuses($PASS, '/record/1', ua => BROWSER, from => '127.0.0.5'),
	join(' ', (200) x $PASS), "browser from 127.0.0.5: $PASS answer 200");

$r = get('/record/1', ua => BROWSER, from => '127.0.0.5');
is(status($r), 429, 'browser from 127.0.0.5: the next answers 429');
is(header($r, 'Retry-After'), '60', 'browser 429: Retry-After 60');

# the exemption belongs to the verified crawler, not to its address
is(statuses($PASS, '/record/1', ua => BROWSER, from => '127.0.0.2'),
	join(' ', (200) x $PASS), "browser from 127.0.0.2: $PASS answer 200");
is(status(get('/record/1', ua => BROWSER, from => '127.0.0.2')), 429,
	'browser from 127.0.0.2 (Googlebot\'s range): 429');
is(status(get('/record/3', ua => $GOOGLEBOT, from => '127.0.0.2')), 200,
	'verified Googlebot from the same address: still 200');

# a spoofed Googlebot may read robots.txt, never rate-limited (Google's crawler documentation:
# robots.txt always answers 200)
is(statuses($PASS + 5, '/robots.txt', ua => $GOOGLEBOT, from => '127.0.0.3'),
	join(' ', (200) x ($PASS + 5)), 'spoofed Googlebot on /robots.txt: ' . ($PASS + 5) . ' answer 200');
# and a machine door is open to it, counted in the rate class
is(statuses($PASS, '/oai', ua => $GOOGLEBOT, from => '127.0.0.3'),
	join(' ', (200) x $PASS), "spoofed Googlebot on /oai: $PASS answer 200");
$r = get('/oai', ua => $GOOGLEBOT, from => '127.0.0.3');
is(status($r), 429, 'spoofed Googlebot on /oai: the next answers 429');

# the facet guard still counts a verified crawler as a crawler
# (browse_shed.exempt_verified is not set): 4 parameters on a browse page
$r = get('/glam/browse?page=2&sf_culture=en&view=card&subjects=1',
	ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 429, 'verified Googlebot, 4 parameters on /glam/browse: 429');
is(header($r, 'Retry-After'), '30', 'facet 429: Retry-After 30');

# the throttle log: the verdict of each 429

wait_log($t, qr/ refusal=(?:rate|facet) /, 4);
my @lines = grep { / refusal=rate / } log_lines($t);
is(scalar @lines, 3, 'three rate lines in the throttle log');
is(scalar(log_lines($t)), 4, 'and the facet line, nothing else');

like($lines[0] // '', qr!^127\.0\.0\.5 \[[^]]+\] "GET /record/1 HTTP/1\.0" 429 agent="" purpose= verdict=none action=allow refusal=rate facet= class=default referer="-" ua="\Q${\ BROWSER}\E"$!,
	'browser line: the whole format, verdict none');
like($lines[1] // '', qr!^127\.0\.0\.2 .* 429 agent="" .* verdict=none .* class=default !,
	'browser in Googlebot\'s range: verdict none');
like($lines[2] // '', qr!^127\.0\.0\.3 .*"GET /oai HTTP/1\.0" 429 agent="Googlebot" purpose=search verdict=spoofed action=allow refusal=rate facet= class=default !,
	'spoofed Googlebot line: verdict spoofed');

my @facet = grep { / refusal=facet / } log_lines($t);
like($facet[0] // '', qr!^127\.0\.0\.2 .* 429 agent="Googlebot" purpose=search verdict=verified action=allow refusal=facet !,
	'facet line: verdict verified');
is(scalar(grep { /verdict=verified/ && / refusal=rate / } log_lines($t)), 0,
	'no rate line for a verified crawler');

###############################################################################
