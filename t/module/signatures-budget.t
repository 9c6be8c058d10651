#!/usr/bin/perl

# A signed agent's crawl budget is its own: an agent that only Web Bot Auth
# signatures name (no User-Agent token) has fixed slots in the budget zone,
# like every agent a User-Agent names, so bots whose product token spells
# its name (unknown-bot, budgeted by that token) count apart from it. They
# used to share its key: enough of them spent its `verified` budget, and
# the signed agent got 429s it had not earned.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign qw/ new_key public_x /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(6);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-signed-budget
  throttle_log: /var/log/nginx/signed-budget-throttled.log
catalogue:
  agents:
    - name: Example-Agent
      operator: Example
      purpose: ai-user
      robots_only: true
      signature_agent: https://agent.example
rate_limits:
  classes: [{name: default, rate: 6000r/m, burst: 1000}]
crawl_budget:
  address: 1000r/m,1000r/m
  agent: 1000r/m,1000r/m
  shared: 1000r/m,1000r/m
  verified: 3r/m,3r/m
  verified_for: 1h
robots: {}
module:
  zone_size: 4m
  signatures:
    hosts: [localhost]
EOF
my $dir = render($t, "$d/policy.yaml");

new_key("$d/agent.pem");
my $X = public_x("$d/agent.pem");
$t->write_file("$dir/crawlward-signature-keys.json" =~ s!^\Q$d\E/!!r, <<"EOF");
{"format": 1, "directories": {
  "https://agent.example": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": "$X"}]}
}}
EOF

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    log_format who '\$status \$crawlward_agent \$crawlward_purpose \$crawlward_verdict';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/who.log who;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $n = 0;
sub signed { get('/page', ua => $CHROME, headers => [ Crawlward::Sign::signed_headers($d,
	key => "$d/agent.pem", keyid => 'k1', nonce => 'n' . $n++) ]) }

# four bots that only say the signed agent's name: unknown bots, budgeted by their token
is(join(' ', map { status(get('/page', ua => 'Example-Agent/1.0 (+https://bots.example/)')) // 'closed' } 1 .. 4),
	'200 200 200 200', 'four bots named by the token "Example-Agent": 200');
wait_file_lines("$d/who.log", 4);
is((file_lines("$d/who.log"))[0], '200 Example-Agent unknown-bot unverified', 'each an unknown bot, unverified');

# the signed agent has its verified budget (3 a minute) to itself
is(join(' ', map { status(signed()) // 'closed' } 1 .. 3), '200 200 200',
	'the signed agent after them: its three verified requests a minute, 200');
wait_file_lines("$d/who.log", 7);
is((file_lines("$d/who.log"))[4], '200 Example-Agent ai-user verified', 'verified by its signature');
is(status(signed()), 429, 'its fourth: 429, its own verified budget');

# and the token's bots still have theirs
is(status(get('/page', ua => 'Example-Agent/1.0 (+https://bots.example/)')), 200, 'a bot named by the token after it: 200');

###############################################################################
