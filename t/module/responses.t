#!/usr/bin/perl

# ngx_http_crawlward_module's log phase (issue 9, point 9): responses counted
# by agent, verdict and status class (200, 404, 429 from limit_req and from
# the facet guard, 444 from the bot-blocker, 502 from a failing upstream),
# exactly, in the status JSON and Prometheus text, across 2 workers, a
# request with subrequests counted once; a verified search crawler's 429 or
# 5xx logged at warn once a minute per agent, naming the layer.

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
my $BINGBOT = 'Mozilla/5.0 (compatible; bingbot/2.0; '
	. '+http://www.bing.com/bingbot.htm)';
my $DDG = 'DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
	. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)';

my $t = Test::Nginx->new()->has(qw/http realip limit_req proxy ssi/)
	->plan(20);

my $dir = render($t, 't/policies/module.yaml');
my $d = $t->testdir();
write_page($t);
$t->write_file('www/ssi.html', 'a <!--# include virtual="/page" --> '
	. 'b <!--# include virtual="/page" -->');

# reuseport: each worker accepts on its own socket, so the kernel spreads
# the connections over both workers

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    limit_req_zone \$binary_remote_addr zone=one:1m rate=1r/m;

    server {
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        server_name  localhost;

        crawlward on;
        set \$crawlward_maintenance "";
        log_subrequest on;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        location /missing {
            root $d/www;
            try_files /nonexistent =404;
        }

        # a rate class: the second request in a minute gets 429
        location /rate/ {
            limit_req zone=one;
            limit_req_status 429;
            root $d/www;
            try_files /page.html =404;
        }

        # nothing listens there: 502
        location /fail {
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }

        location /browse {
            crawlward_facets names=subjects,places max_facets_without_referer=2 exempt_verified=off;
            root $d/www;
            try_files /page.html =404;
        }

        # two subrequests, logged too (in the location they run in)
        location /ssi {
            ssi on;
            root $d/www;
            try_files /ssi.html =404;
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

sub statuses {
	my ($n, $uri, %o) = @_;
	my @s;
	push @s, status(get($uri, %o)) // 444 for 1 .. $n;
	return join ' ', @s;
}

my @gb = (ua => $GOOGLEBOT, from => '127.0.0.2');

is(statuses(2, '/', ua => BROWSER), '200 200', 'browser: 200 200');
is(statuses(1, '/missing', ua => BROWSER), '404', 'browser: 404');
like(statuses(1, '/ssi', ua => BROWSER) . ' ' . get('/ssi', ua => BROWSER),
	qr/^200 .*a crawlward test page\s+b crawlward test page/s,
	'browser: a page with two subrequests');

is(statuses(3, '/', @gb), '200 200 200', 'verified Googlebot: 200 x3');
is(statuses(1, '/missing', @gb), '404', 'verified Googlebot: 404');
is(statuses(3, '/rate/', @gb), '200 429 429',
	'verified Googlebot: rate class 200 429 429');
is(statuses(1, '/fail', @gb), '502', 'verified Googlebot: 502 from the upstream');

is(statuses(2, '/', ua => $GPTBOT), '444 444', 'GPTBot (spoofed): 444 444');
is(statuses(1, '/browse?subjects=1&places=2', ua => $BINGBOT, from => '127.0.0.4'),
	'429', 'verified bingbot: 429 from the facet guard');
is(statuses(1, '/fail', ua => $DDG, from => '127.0.0.2'), '502',
	'verified DuckDuckBot: 502');

# one line per agent, whichever worker saw each refusal first

my @warn = wait_error_log($t, qr/\[warn\].*crawlward: verified search crawler/, 3);
sleep 1;
@warn = error_log_lines($t, qr/\[warn\].*crawlward: verified search crawler/);
my %by = map { /crawler "([^"]+)" (got .*?) while logging request/ ? ($1 => $2) : () } @warn;
is(scalar @warn, 3, 'three warn lines: one per agent');
is($by{Googlebot}, 'got 429 from a rate class (limit_req)',
	'Googlebot: once for two 429s and a 502, naming the rate class');
is($by{bingbot}, 'got 429 from the facet guard (facet-no-referer)',
	'bingbot: naming the facet guard and its rule');
is($by{DuckDuckBot}, 'got 502 from the site (upstream or other)',
	'DuckDuckBot: naming the site');

# the status: every worker's counts; the log phase runs after the reply,
# so wait for the last of them

my $st;
for (1 .. 30) {
	$st = module_status('/crawlward-status');
	last if ($st->{verified_search}{responses} // 0) >= 10
		&& grep { $_->{agent} eq '-' && $_->{statuses}{'2xx'} == 4 }
			@{ $st->{responses} || [] };
	select undef, undef, undef, 0.1;
}

my $responses = join "\n", map {
	my $e = $_;
	"$e->{agent} $e->{verdict}: "
		. join ' ', map { "$_=$e->{statuses}{$_}" } sort keys %{ $e->{statuses} }
} sort { $a->{agent} cmp $b->{agent} } @{ $st->{responses} || [] };

is($responses, join("\n",
	'- none: 2xx=4 3xx=0 404=1 429=0 444=0 4xx=0 5xx=0 other=0',
	'DuckDuckBot verified: 2xx=0 3xx=0 404=0 429=0 444=0 4xx=0 5xx=1 other=0',
	'GPTBot spoofed: 2xx=0 3xx=0 404=0 429=0 444=2 4xx=0 5xx=0 other=0',
	'Googlebot verified: 2xx=4 3xx=0 404=1 429=2 444=0 4xx=0 5xx=1 other=0',
	'bingbot verified: 2xx=0 3xx=0 404=0 429=1 444=0 4xx=0 5xx=0 other=0'),
	'status: responses by agent, verdict and class; subrequests not counted');

my $vs = $st->{verified_search} || {};
is(join(' ', map { "$_=" . ($vs->{$_} // 'undef') } sort keys %$vs),
	'2xx=4 3xx=0 404=1 429=3 429_and_5xx=5 444=0 4xx=0 5xx=2 other=0 responses=10',
	'status: verified search crawlers: 3 x 429 and 2 x 5xx of 10');

my $p = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
is(join("\n", sort $p =~ /^(crawlward_responses_total\{.*)$/mg), join("\n",
	'crawlward_responses_total{agent="-",verdict="none",status="2xx"} 4',
	'crawlward_responses_total{agent="-",verdict="none",status="404"} 1',
	'crawlward_responses_total{agent="DuckDuckBot",verdict="verified",status="5xx"} 1',
	'crawlward_responses_total{agent="GPTBot",verdict="spoofed",status="444"} 2',
	'crawlward_responses_total{agent="Googlebot",verdict="verified",status="2xx"} 4',
	'crawlward_responses_total{agent="Googlebot",verdict="verified",status="404"} 1',
	'crawlward_responses_total{agent="Googlebot",verdict="verified",status="429"} 2',
	'crawlward_responses_total{agent="Googlebot",verdict="verified",status="5xx"} 1',
	'crawlward_responses_total{agent="bingbot",verdict="verified",status="429"} 1'),
	'prometheus: responses by agent, verdict and class');
is(join("\n", $p =~ /^(crawlward_verified_search_responses_total\{.*)$/mg), join("\n",
	'crawlward_verified_search_responses_total{status="2xx"} 4',
	'crawlward_verified_search_responses_total{status="3xx"} 0',
	'crawlward_verified_search_responses_total{status="404"} 1',
	'crawlward_verified_search_responses_total{status="429"} 3',
	'crawlward_verified_search_responses_total{status="444"} 0',
	'crawlward_verified_search_responses_total{status="4xx"} 0',
	'crawlward_verified_search_responses_total{status="5xx"} 2',
	'crawlward_verified_search_responses_total{status="other"} 0'),
	'prometheus: verified search crawlers by class, in order');
like($p, qr/^# TYPE crawlward_responses_total counter$/m, 'prometheus: TYPE counter');

# a minute later an agent is warned about again: not waited for here, the
# arithmetic is policy/src/decisions/responses.rs's warn_once_a_minute
is(scalar(error_log_lines($t, qr/\[(?:alert|crit|emerg)\]/)), 0, 'no alert in the error log');

###############################################################################
