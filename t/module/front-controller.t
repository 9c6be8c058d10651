#!/usr/bin/perl

# site.front_controller with ngx_http_crawlward_module: /index.php/deep/x is
# /deep/x to a Laravel application, so the module counts it in the deep
# budget, and /index.php/agents/x is a path for signed agents as /agents/x
# is; a script of another name, and robots.txt behind the controller, are
# other paths. (The facet guard, the browse cap, the rate classes and the
# machine doors behind it: the catalogue suites, rendered for the module.)

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $BOT = SELF_DECLARED_BOT;

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(13);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
  trusted_proxies: [127.0.0.1]
  front_controller: /index.php
install:
  dir: /etc/nginx/crawlward-fc
  throttle_log: /var/log/nginx/fc-throttled.log
robots:
  deep_paths: ["/deep/"]
module:
  signatures:
    required: [/agents/]
    hosts: [localhost]
EOF
my $dir = render($t, "$d/policy.yaml");
$t->write_file("$dir/crawlward-signature-keys.json" =~ s!^\Q$d\E/!!r,
	qq!{"format": 1, "directories": {}}\n!);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    crawlward_budget_zone zone=fc:1m;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            crawlward_budget zone=fc address=600r/m,3r/m agent=6000r/m,6000r/m shared=6000r/m,6000r/m;
            add_header X-Budget "\$crawlward_budget" always;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

sub from { my ($uri, $xff) = @_; return get($uri, ua => $BOT, xff => $xff); }

# three deep requests a minute per address: behind the controller or not, one budget
my @st = map { status(from($_, '192.0.2.1')) } '/deep/a', '/index.php/deep/b', '/index.php/deep/c';
is("@st", '200 200 200', 'three deep requests, two behind /index.php: 200');
my $r = from('/index.php/deep/d', '192.0.2.1');
is(status($r), 429, 'the fourth, behind /index.php: 429');
is(header($r, 'X-Budget'), 'address-deep', 'by the address\'s deep budget');
like(header($r, 'Retry-After') // '', qr/^\d+$/, 'with Retry-After');
is(status(from('/deep/e', '192.0.2.1')), 429, 'and the plain path is spent too');

# another script's name is another path: not deep, not this budget
@st = map { status(from($_, '192.0.2.2')) } ('/index.phpx/deep/a') x 4, ('/app/index.php/deep/b') x 2;
is("@st", '200 200 200 200 200 200', 'another script\'s path is not a deep path');

# paths for signed agents: the same behind the controller
$r = get('/index.php/agents/x', ua => BROWSER);
is(status($r), 403, '/index.php/agents/x unsigned: 403');
like(header($r, 'Accept-Signature') // '', qr/web-bot-auth/, 'with Accept-Signature');
is(status(get('/agents/x', ua => BROWSER)), 403, '/agents/x unsigned: 403');
is(status(get('/index.phpagents/x', ua => BROWSER)), 200, '/index.phpagents/x: another path, 200');

# robots.txt behind the controller is the application's page
@st = map { status(from('/index.php/robots.txt', '192.0.2.3')) } 1 .. 2;
is("@st", '200 200', '/index.php/robots.txt: the application\'s page');
is(status(get('/robots.txt', ua => $BOT, xff => '192.0.2.1')), 200,
	'robots.txt for an address whose budget is spent: 200');
is(scalar(error_log_lines($t, qr/\[(alert|emerg|crit)\]/)), 0, 'no alerts');

###############################################################################
