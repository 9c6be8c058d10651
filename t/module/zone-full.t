# ngx_http_crawlward_module with a counters zone too small for the catalogue: nginx starts with a notice, agents past the last slot are counted as "other", and their requests still get their decision (no 500).

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use JSON::PP;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';


my $t = Test::Nginx->new()->has(qw/http/)->plan(19);

my $dir = render($t, 't/policies/module.yaml');
# agents in the rendered catalogue
my $AGENTS = scalar @{ JSON::PP->new->decode(rendered_file($t, 'crawlward-catalogue.json'))->{agents} };
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
    crawlward_zone zone=small:32k;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;

        location / {
            root $d/www;
            try_files /page.html =404;

            add_header X-Crawlward "\$crawlward_agent|\$crawlward_operator|\$crawlward_purpose|\$crawlward_verdict|\$crawlward_action" always;
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

my $st = module_status('/crawlward-status');
ok($st, 'status: JSON');
is($st->{zone}{name}, 'small', 'status: zone small');
is($st->{zone}{size}, 32768, 'status: zone size 32k');

my $slots = $st->{zone}{slots} // 0;
cmp_ok($slots, '<', $AGENTS + 2, "status: $slots slots, fewer than the agents");
cmp_ok($slots, '>=', 3, 'status: at least "-", "other" and one agent');
is($st->{zone}{slots_used}, $slots, 'status: every slot used');

my $full = $AGENTS - ($slots - 2);
my @l = wait_error_log($t, qr/crawlward zone "small" is full/);
is(scalar @l, 1, 'one "is full" line');
like($l[0] // '', qr/\[notice\] .*crawlward zone "small" is full: $full agents count as "other"/,
	"notice: $full agents count as \"other\"");

# the catalogue's last agent: unknown-bot, the bots it does not name

my $r = get('/page', ua => 'Rivetbot/1.0');
like($r, qr!^HTTP/1\.1 200 OK\x0d\x0a!, 'Rivetbot (unknown-bot): 200');
is(header($r, 'X-Crawlward'), 'Rivetbot|unknown|unknown-bot|unverified|allow',
	'Rivetbot: an unknown bot, named by its product token');
is(body($r), PAGE, 'Rivetbot: the page');

# a refused agent late in the catalogue: HeadlessChrome, scripting
is(get('/page', ua => 'Mozilla/5.0 HeadlessChrome/131.0.0.0'), '',
	'HeadlessChrome (late, no slot): still 444');

# an early agent has its own slot
is(status(get('/page', ua => $GOOGLEBOT, from => '127.0.0.2')), 200,
	'Googlebot (early): 200');

$st = module_status('/crawlward-status');
is(module_count($st, 'other', 'unverified', 'allow'), 1,
	'status: Rivetbot counted as "other", unverified, allow');
is(module_count($st, 'other', 'unverified', 'block-444'), 1,
	'status: HeadlessChrome counted as "other", block-444');
is(module_count($st, 'unknown-bot', 'unverified', 'allow'), 0,
	'status: no unknown-bot entry: the zone is full');
is(module_count($st, 'Googlebot', 'verified', 'allow'), 1,
	'status: Googlebot under its own name');
is(scalar @{ $st->{requests} || [] }, 3, 'status: three entries');

is(scalar(error_log_lines($t, qr/\[(?:emerg|crit|error)\]/)), 0,
	'no errors in error.log');

###############################################################################
