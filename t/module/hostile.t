# ngx_http_crawlward_module and hostile User-Agents: 8 KB long, invalid UTF-8, repeated headers; each gets a clear decision that agrees with $http_user_agent (of which identification reads the first 512 bytes, as the stock maps do), and no worker crashes.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(31);

my $dir = render($t, 't/policies/module.yaml');
my $d = $t->testdir();
write_page($t);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    large_client_header_buffers 4 32k;

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

        # the same, but never refused: shows what the module decided
        location /probe/ {
            crawlward off;
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
            add_header X-UA "\$http_user_agent" always;
        }
    }
}

EOF

$t->run();

###############################################################################

# GPTBot from 127.0.0.1, outside its published ranges (t/ranges/: 127.0.0.2)
my $GPTBOT_VARS = 'GPTBot|OpenAI|ai-training|spoofed|block-444';

# 8 KB User-Agents

my $long = 'a' x 8192;

my $r = get('/page', ua => $long);
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, '8 KB of "a": 200');
# one product and nothing else is a script's shape: an unknown bot, named by its first 64 bytes
is(header($r, 'X-Crawlward'), ('a' x 64) . '|unknown|unknown-bot|unverified|allow',
	'8 KB of "a": a script\'s shape, an unknown bot, allowed');
is(length(header($r, 'X-UA') // ''), 8192, '8 KB of "a": X-UA has all 8192 bytes');
is(body($r), PAGE, '8 KB of "a": the page');

# identification reads a User-Agent's first 512 bytes (docs/policy.md): a name past them is
# not read, and the string is what its first 512 bytes make it
$r = get('/page', ua => $long . ' GPTBot');
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, '8 KB of "a", then the product GPTBot: read up to 512 bytes, 200');
is(scalar(error_log_lines($t, qr/crawlward: refused with 444: agent "GPTBot"/)),
	0, '8 KB of "a", then GPTBot: no refusal line');

$r = get('/probe/x', ua => $long . ' GPTBot');
is(header($r, 'X-Crawlward'), ('a' x 64) . '|unknown|unknown-bot|unverified|allow',
	'8 KB of "a", then GPTBot, on the probe: the "a" token\'s unknown bot');

# GPTBot inside a longer token is no claim of GPTBot: a bot the catalogue does
# not name, by its token (cut at 64 bytes)
$r = get('/probe/x', ua => $long . 'GPTBot');
is(header($r, 'X-Crawlward'), ('a' x 64) . '|unknown|unknown-bot|unverified|allow',
	'8 KB of "a" and GPTBot in one token: an unknown bot, named by its first 64 bytes');

$r = get('/page', ua => 'Mozilla/5.0 ' . ('(compatible) ' x 600) . 'Googlebot/2.1',
	from => '127.0.0.2');
is(status($r), 200, '7 KB Googlebot from 127.0.0.2: 200');
is(header($r, 'X-Crawlward'), '|||none|allow',
	'7 KB Googlebot from 127.0.0.2: its name past 512 bytes is not read');
$r = get('/page', ua => 'Mozilla/5.0 ' . ('(compatible) ' x 37) . 'Googlebot/2.1',
	from => '127.0.0.2');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'Googlebot ending at byte 506, from 127.0.0.2: verified');

# invalid UTF-8

is(get('/page', ua => "\xff\xfe\xc3 GPTBot\xfe"), '',
	'invalid UTF-8 around GPTBot: 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "GPTBot", verdict spoofed/, 1)),
	1, 'invalid UTF-8 around GPTBot: the refusal line');

$r = get('/probe/x', ua => "\xff\xfe\xc3 GPTBot\xfe");
is(header($r, 'X-Crawlward'), $GPTBOT_VARS,
	'invalid UTF-8 around GPTBot, on the probe: GPTBot, block-444');
is(header($r, 'X-UA'), "\xff\xfe\xc3 GPTBot\xfe",
	'invalid UTF-8 around GPTBot: X-UA has the bytes as sent');

$r = get('/page', ua => "\xff\xfe\xc3");
is(status($r), 200, 'invalid UTF-8 alone: 200');
is(header($r, 'X-Crawlward'), '|||none|allow', 'invalid UTF-8 alone: none, allow');

$r = get('/page', ua => "Mozilla/5.0 \xc0\xaf\xed\xa0\x80 Chrome/131");
is(status($r), 200, 'overlong and surrogate UTF-8 in a browser UA: 200');

# repeated User-Agent headers: whatever nginx makes of them ($http_user_agent:
# the first before 1.23.0, both joined with ", " since), the module decides
# on the same

my @two = (headers => [ 'User-Agent: Mozilla/5.0 Chrome/131',
	'User-Agent: GPTBot/1.2' ]);

my $joined = $t->has_version('1.23.0');

$r = get('/probe/x', ua => undef, @two);
is(status($r), 200, 'two User-Agents, probe: 200');
is(header($r, 'X-UA'),
	$joined ? 'Mozilla/5.0 Chrome/131, GPTBot/1.2' : 'Mozilla/5.0 Chrome/131',
	'two User-Agents: $http_user_agent ' . ($joined ? 'joins them' : 'is the first'));
is(header($r, 'X-Crawlward'), $joined ? $GPTBOT_VARS : '|||none|allow',
	'two User-Agents: the module decides on $http_user_agent');

$r = get('/page', ua => undef, @two);
if ($joined) {
	is($r, '', 'two User-Agents, GPTBot second: 444 (nginx 1.23+ joins them)');
} else {
	is(status($r), 200, 'two User-Agents, GPTBot second: 200 (nginx before 1.23 keeps the first)');
}

# GPTBot first: refused on every version
is(get('/page', ua => undef, headers => [ 'User-Agent: GPTBot/1.2',
	'User-Agent: Mozilla/5.0 Chrome/131' ]), '',
	'two User-Agents, GPTBot first: 444');

# an empty one and a browser: "" before 1.23.0 (add_header then adds no
# X-UA), ", Mozilla/5.0 Chrome/131" since (not empty, so not verdict empty)
$r = get('/probe/x', ua => undef, headers => [ 'User-Agent:',
	'User-Agent: Mozilla/5.0 Chrome/131' ]);
is(header($r, 'X-UA'), $joined ? ', Mozilla/5.0 Chrome/131' : undef,
	'empty User-Agent, then a browser: $http_user_agent');
is(header($r, 'X-Crawlward'), $joined ? '|||none|allow' : '|||empty|block-444',
	'empty User-Agent, then a browser: the module decides on the same');

# a header name in another case is the same header
$r = get('/probe/x', ua => undef, headers => [ 'user-agent: GPTBot/1.2' ]);
is(header($r, 'X-Crawlward'), $GPTBOT_VARS, 'user-agent in lower case: GPTBot');

# a User-Agent past large_client_header_buffers: nginx's own 400, before us
$r = get('/page', ua => 'a' x 40000);
like($r, qr!^HTTP/1\.1 400 !, '40 KB User-Agent: nginx answers 400');

# still alive, and nothing crashed

$r = get('/page', ua => BROWSER);
is(status($r), 200, 'a browser afterwards: 200');
is(header($r, 'X-Crawlward'), '|||none|allow', 'a browser afterwards: none, allow');

is(join("\n", error_log_lines($t, qr/exited on signal|\[crit\]|panicked/)), '',
	'no worker exited on a signal, no panic');
is(scalar(error_log_lines($t, qr/crawlward: refused/)),
	2 + ($joined ? 1 : 0), 'one refusal line per refused request');

###############################################################################
