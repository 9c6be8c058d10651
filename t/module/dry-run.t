# ngx_http_crawlward_module with "crawlward_dry_run on": every request gets through, $crawlward_action still names the refusal, error.log says "dry run, would refuse" and the status counts it; "crawlward_dry_run off" in a location refuses again.

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
my $AHREFS = 'Mozilla/5.0 (compatible; AhrefsBot/7.0; '
	. '+http://ahrefs.com/robot/)';

my $t = Test::Nginx->new()->has(qw/http limit_req/)->plan(40);

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

    crawlward_catalogue $dir/crawlward-catalogue.json;
    crawlward_zone zone=crawlward:1m;
    limit_req_zone \$binary_remote_addr zone=dryrate:1m rate=1r/m;
    limit_req_zone \$binary_remote_addr zone=trial:1m rate=1r/m;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;
        crawlward_dry_run on;

        location / {
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
        }

        # the facet guard in a dry run, beside a real limit_req
        location /browse/ {
            crawlward_facets names=a,b,c crawler_max_params=1;
            limit_req zone=dryrate;
            limit_req_status 429;
            root $d/www;
            try_files /page.html =404;
            add_header X-Refusal "[\$crawlward_refusal]" always;
        }

        # a limit_req in its own dry run, and a 429 that the site answers
        location /trial/ {
            limit_req zone=trial;
            limit_req_dry_run on;
            try_files /absent =429;
            add_header X-Refusal "[\$crawlward_refusal]" always;
            add_header X-Limit-Req "\$limit_req_status" always;
        }

        location /enforced/ {
            crawlward_dry_run off;
            root $d/www;
            try_files /page.html =404;
        }

        location = /crawlward-status {
            crawlward off;
            crawlward_status;
        }
    }
}

EOF

$t->run();

###############################################################################

# GPTBot and AhrefsBot from their operators' ranges (t/ranges/: 127.0.0.2)

my $r = get('/page', ua => $GPTBOT, from => '127.0.0.2');
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'dry run, GPTBot: 200');
is(body($r), PAGE, 'dry run, GPTBot: the page');
is(header($r, 'X-Crawlward'), 'GPTBot|OpenAI|ai-training|verified|block-444',
	'dry run, GPTBot: $crawlward_action is still block-444');

$r = get('/page', ua => $GOOGLEBOT, from => '127.0.0.3');
is(status($r), 200, 'dry run, Googlebot from 127.0.0.3: 200');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|spoofed|block-444',
	'dry run, Googlebot from 127.0.0.3: spoofed, block-444');

$r = get('/page', ua => undef);
is(status($r), 200, 'dry run, no User-Agent: 200');
is(header($r, 'X-Crawlward'), '|||empty|block-444',
	'dry run, no User-Agent: empty, block-444');

$r = get('/page', ua => $AHREFS, from => '127.0.0.2');
is(status($r), 200, 'dry run, AhrefsBot: 200');
is(header($r, 'X-Crawlward'), 'AhrefsBot|Ahrefs|seo|verified|block-403',
	'dry run, AhrefsBot: block-403');

$r = get('/page', ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 200, 'dry run, Googlebot from 127.0.0.2: 200');
is(header($r, 'X-Crawlward'), 'Googlebot|Google|search|verified|allow',
	'dry run, Googlebot from 127.0.0.2: verified, allow');

$r = get('/page', ua => BROWSER);
is(status($r), 200, 'dry run, browser: 200');
is(header($r, 'X-Crawlward'), '|||none|allow', 'dry run, browser: none, allow');

# the error.log: what it would have done, and nothing refused

my @l = wait_error_log($t, qr/crawlward: dry run, would refuse/, 4);
is(scalar @l, 4, 'four "dry run, would refuse" lines');
like($l[0] // '', qr/ \[info\] .*crawlward: dry run, would refuse with 444: agent "GPTBot", verdict verified, client: 127\.0\.0\.2, server: localhost, request: "GET \/page HTTP\/1\.0"/,
	'GPTBot: would refuse with 444');
like($l[1] // '', qr/crawlward: dry run, would refuse with 444: agent "Googlebot", verdict spoofed, client: 127\.0\.0\.3,/,
	'spoofed Googlebot: would refuse with 444');
like($l[2] // '', qr/crawlward: dry run, would refuse with 444: agent "-", verdict empty, client: 127\.0\.0\.1,/,
	'no User-Agent: would refuse with 444');
like($l[3] // '', qr/crawlward: dry run, would refuse with 403: agent "AhrefsBot", verdict verified,/,
	'AhrefsBot: would refuse with 403');
is(scalar(error_log_lines($t, qr/crawlward: refused/)), 0,
	'no "refused" lines in dry run');

# the status counts them under the action that would have been taken

my $st = module_status('/crawlward-status');
ok($st, 'status: JSON');
is(module_count($st, 'GPTBot', 'verified', 'block-444'), 1,
	'status: GPTBot verified block-444, 1');
is(module_count($st, 'Googlebot', 'spoofed', 'block-444'), 1,
	'status: Googlebot spoofed block-444, 1');
is(module_count($st, '-', 'empty', 'block-444'), 1,
	'status: no agent, empty, block-444, 1');
is(module_count($st, 'AhrefsBot', 'verified', 'block-403'), 1,
	'status: AhrefsBot block-403, 1');
is(module_count($st, 'Googlebot', 'verified', 'allow'), 1,
	'status: Googlebot verified allow, 1');
is(module_count($st, '-', 'none', 'allow'), 1, 'status: browser, none, allow, 1');
is(join(' ', map { "$_=" . ($st->{totals}{action}{$_} // 'undef') }
	qw/ allow throttle block-444 block-403 /),
	'allow=2 throttle=0 block-444=3 block-403=1',
	'status: totals by action');
is(scalar @{ $st->{requests} || [] }, 6, 'status: six entries');

# a dry run's would-be facet refusal names no refusal: limit_req's real 429 is the rate's
# (it was labelled the facet guard's, which sends no Retry-After of nginx's)
my $RIVET = 'Mozilla/5.0 (compatible; Rivetbot/1.0)';
$r = get('/browse/?a=1&b=2&c=3', ua => $RIVET);
is(status($r), 200, 'dry run: a crawler over the facet guard\'s parameters passes');
is(header($r, 'X-Refusal'), '[]', 'and is refused by nothing');
$r = get('/browse/?a=1&b=2&c=3', ua => $RIVET);
is(status($r), 429, 'its second request: limit_req\'s 429');
is(header($r, 'X-Refusal'), '[rate]', 'refused by the rate, not the facet guard');

# limit_req's own dry run refuses nothing: a 429 the site answers beside its
# REJECTED_DRY_RUN is the site's, not the rate's (the map took it for a rate refusal)
get('/trial/x', ua => BROWSER);
$r = get('/trial/x', ua => BROWSER);
is(header($r, 'X-Limit-Req'), 'REJECTED_DRY_RUN', 'limit_req_dry_run: its second request would be refused');
is(status($r), 429, 'the site answers 429');
is(header($r, 'X-Refusal'), '[]', 'which no layer of crawlward refused');

# "crawlward_dry_run off" in a location overrides the server's "on"

is(get('/enforced/x', ua => $GPTBOT, from => '127.0.0.2'), '',
	'dry run off in a location: GPTBot 444');
is(scalar(wait_error_log($t,
	qr/crawlward: refused with 444: agent "GPTBot", verdict verified/)),
	1, 'dry run off in a location: "refused with 444" line');
is(status(get('/enforced/x', ua => BROWSER)), 200,
	'dry run off in a location: browser 200');

$st = module_status('/crawlward-status');
is(module_count($st, 'GPTBot', 'verified', 'block-444'), 2,
	'status: the refused GPTBot counted too, 2');
is($st->{totals}{action}{'block-444'}, 4, 'status: block-444 total 4');

###############################################################################
