#!/usr/bin/perl

# The crawlers' share of server time, live: the module adds each response's
# upstream time to its purpose's group over the last 15 minutes, and counts
# refusals by layer, in the status endpoint and Prometheus. The same traffic
# read back from the access log by `crawlward analyze` gives the same share.

use warnings;
use strict;

use Test::More;

use JSON::PP;
use Test::Nginx;
use Crawlward::Test;
use Crawlward::Backend;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; '
	. 'GPTBot/1.2; +https://openai.com/gptbot)';

my $t = Test::Nginx->new()->has(qw/http proxy/)->plan(18);

my $d = $t->testdir();
$t->write_file('policy.yaml', <<'EOF');
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-time
  throttle_log: /var/log/nginx/time-throttled.log
  access_log: /var/log/nginx/time-access.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
robots: {}
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");
my $log = access_log($t);

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
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
    }
}

EOF

$t->run_daemon(\&timed_backend, port(8081));
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start backend on port " . port(8081) . "\n";

###############################################################################

# a person, a verified Googlebot and a self-declared bot, each on pages the
# backend takes its time over; an AI-training crawler and a request with no
# User-Agent, refused by the bot-blocker, never reach the backend
is(status(get("/ms/120/page$_", ua => BROWSER)), 200, "a person's page ($_)") for 1 .. 3;
is(status(get("/ms/60/record$_", ua => $GOOGLEBOT, from => '127.0.0.2')), 200,
	"verified Googlebot ($_)") for 1 .. 2;
is(status(get('/ms/30/list', ua => SELF_DECLARED_BOT)), 200, 'a self-declared bot');
is(status(get('/ms/10/x', ua => undef)), undef, 'no User-Agent: refused (444)');
is(status(get('/ms/10/y', ua => $GPTBOT)), undef, 'GPTBot: refused (444)');

ok(wait_file_lines($log, 8), 'nginx wrote eight lines');
my $st = module_status('/crawlward-status');
my $live = $st->{server_time};

my ($status, $out) = run_bounded(60, crawlward_bin(), 'analyze', "$d/policy.yaml", $log,
	'--ranges-dir', repo_root() . '/t/ranges', '--format', 'json');
my $r = eval { decode_json($out) } || {};
my $after = $r->{crawler_share} || {};

# the same milliseconds, so the same figures (to the float's last digits)
my @figures = map { sprintf('%.4f', $_ // -1) }
	$live->{seconds}, $live->{crawler_seconds}, $live->{crawler_share};
is_deeply(\@figures,
	[ map { sprintf('%.4f', $_ // -1) } $after->{seconds}, $after->{crawler_seconds}, $after->{time_share} ],
	'the live share of upstream time is what analyze finds in the log')
	or diag(explain([ $live, $after ]));
cmp_ok($live->{crawler_share}, '>', 0.2, 'the crawlers\' share is about a third');
cmp_ok($live->{crawler_share}, '<', 0.4, 'and no more');
is_deeply([ sort keys %{ $live->{by_group} } ],
	[ 'people and unknown', 'search', 'unknown-bot' ],
	'by group: the purposes and people that reached the backend');
is($live->{by_group}{search}{responses}, 2, 'search: two responses');
cmp_ok($live->{by_group}{search}{seconds}, '>=', 0.12, 'search: at least the 120 ms the backend took');
is($st->{refusals_by_layer}{'bot-blocker'}, 2, 'refusals by layer: two by the bot-blocker');

my $prom = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
like($prom, qr/^crawlward_refused_total\{layer="bot-blocker"\} 2$/m, 'Prometheus: refusals by layer');
like($prom, qr/^crawlward_upstream_seconds_total\{agent="Googlebot"\} 0\.1[2-9]\d$/m,
	'Prometheus: upstream time by agent');

###############################################################################
