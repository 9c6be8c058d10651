#!/usr/bin/perl

# A reload with a catalogue that a budget zone of the same name and size
# cannot hold (reloaded without nginx -t first) fails, and leaves the
# running configuration its zone as it was: the fixed slots, the counts,
# the budgets it enforces. Laying the zone out again in place used to start
# before the room was checked: the check's panic left the table half reset
# under the old workers, whose budgets then let everything through.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $BOT = 'Mozilla/5.0 (compatible; Rivetbot/1.0)';

my $t = Test::Nginx->new()->has(qw/http/)->plan(5);

my $d = $t->testdir();
write_page($t);
# a catalogue of two agents, and the built-in one (about 2,700 fixed slots)
$t->write_file('small.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-small
catalogue:
  builtin: false
  agents:
    - {name: Examplebot, operator: example.org, purpose: archive, ua: Examplebot, source: a test agent}
    - {name: unknown-bot, operator: unknown, purpose: unknown-bot, source: the detector}
robots: {}
module:
  zone_size: 1m
EOF
my $small = render($t, "$d/small.yaml");
my $builtin = render($t, 't/policies/module.yaml');
my $catalogue = "$small/crawlward-catalogue.json";

sub conf {
	my ($t) = @_;
	$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    crawlward_catalogue $catalogue;
    crawlward_zone zone=c:64k;
    crawlward_budget_zone zone=x:128k lag=off;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;

        location / {
            crawlward_budget zone=x address=2r/m,2r/m;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF
}

conf($t);
$t->run();

is(join(' ', map { status(get('/', ua => $BOT)) } 1 .. 3), '200 200 429', 'two a minute');

# the built-in catalogue, into the same 128k: the reload fails, and says why
$catalogue = "$builtin/crawlward-catalogue.json";
conf($t);
my @old = worker_pids($t);
$t->reload();
my @e = wait_error_log($t, qr/\[emerg\].*crawlward_budget_zone "x" is too small: the catalogue's \d+ fixed slots need at least \d+k/, 1, 10);
ok(@e, 'the reload is refused: the zone is too small for the catalogue') or diag(join "\n", error_log_lines($t));
sleep(0.5);
is(join(' ', sort(worker_pids($t))), join(' ', sort @old), 'the workers of the running configuration go on');

# ... on their zone as it was
is(status(get('/', ua => $BOT)), 429, 'the spent budget is kept: 429');
is(scalar(error_log_lines($t, qr/panic|\[alert\]/)), 0, 'no panic, no alert');

###############################################################################
