#!/usr/bin/perl

# ngx_http_crawlward_module's shared zones across reloads (issue 9, point
# 8): a zone's tag is its layout, so a name that held another kind of
# crawlward zone (or another layout) is handed to nginx as a fresh zone,
# with a notice saying so, instead of being read with shifted memory; the
# same kind and layout is kept, with its counts.

use warnings;
use strict;

use Test::More;
use IO::Socket::INET;

use Test::Nginx qw/ port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $BOT = 'Mozilla/5.0 (compatible; Rivetbot/1.0)';

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(18);

my $dir = render($t, 't/policies/module.yaml');
# another catalogue (its own agents), for the budget zone's fixed slots
my $other = render($t, 't/policies/extra-agent.yaml');
my $catalogue = "$dir/crawlward-catalogue.json";
my $d = $t->testdir();
write_page($t);

sub conf {
	my ($t, $http, $location) = @_;
	$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    crawlward_catalogue $catalogue;
    $http

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;

        location / {
            $location
            root $d/www;
            try_files /page.html =404;
        }

        location = /status {
            crawlward off;
            crawlward_status;
        }
    }
}

EOF
}

# first the counters in zone "x"

conf($t, 'crawlward_zone zone=x:4m;', '');
$t->run();

get('/', ua => $BOT) for 1 .. 3;
my $st = module_status('/status');
my $n = 0;
$n += $_->{count} for grep { $_->{agent} eq 'unknown-bot' } @{ $st->{requests} || [] };
is($n, 3, 'counters in "x": 3 requests');

# then budgets in "x", of the same size: a fresh zone, said so

conf($t, 'crawlward_zone zone=c:64k; crawlward_budget_zone zone=x:4m lag=off;',
	'crawlward_budget zone=x address=2r/m,2r/m;');
reload_workers($t);

my @n = wait_error_log($t, qr/\[notice\].*crawlward_budget_zone "x": the zone of the previous configuration/, 1, 10);
like($n[0] // '', qr/crawlward_budget_zone "x": the zone of the previous configuration held a "crawlward_zone" zone; starting a fresh one/,
	'reload with budgets in "x": a notice names what the zone held');
is(scalar(error_log_lines($t, qr/\[emerg\]/)), 0, 'reload with budgets in "x": no emerg');

my $budgets;
for (1 .. 50) {
	$st = module_status('/status');
	$budgets = ($st->{budgets} || [])->[0];
	last if $budgets && $budgets->{zone}{name} eq 'x';
	select undef, undef, undef, 0.1;
}
is($budgets->{zone}{name} // '', 'x', 'the new workers use budget zone "x"');
is(join(' ', map { status(get('/', ua => $BOT)) } 1 .. 3), '200 200 429',
	'budgets in "x": 2 a minute');

# the same configuration again: the zone is kept, with its counts

reload_workers($t);
is(status(get('/', ua => $BOT)), 429, 'reload with the same layout: the spent budget is kept');
is(scalar(error_log_lines($t, qr/the zone of the previous configuration/)), 1,
	'no second notice');

# another catalogue: the agents' fixed slots are laid out again, in place,
# and the budgets start over

$catalogue = "$other/crawlward-catalogue.json";
conf($t, 'crawlward_zone zone=c:64k; crawlward_budget_zone zone=x:4m lag=off;',
	'crawlward_budget zone=x address=2r/m,2r/m;');
reload_workers($t);
ok(wait_error_log($t, qr/crawlward_budget_zone "x": the catalogue's agents or the zone's sync= changed, so the fixed slots are laid out again and the budgets start over/, 1, 5),
	'another catalogue: a notice says the slots are laid out again');
is(join(' ', map { status(get('/', ua => $BOT)) } 1 .. 3), '200 200 429',
	'another catalogue: the budgets start over');

# a reload back to the first catalogue that fails after the zone's init
# (a second budget zone too small for the catalogue, declared after it):
# the previous workers go on, and their table is left as they laid it out,
# with its spent budget, not laid out for a catalogue no worker runs

my $relaid = qr/crawlward_budget_zone "x": the catalogue's agents or the zone's sync= changed/;
$catalogue = "$dir/crawlward-catalogue.json";
conf($t, 'crawlward_zone zone=c:64k; crawlward_budget_zone zone=x:4m lag=off; crawlward_budget_zone zone=tiny:64k lag=off;',
	'crawlward_budget zone=x address=2r/m,2r/m;');
my @pids = worker_pids($t);
$t->reload();
ok(wait_error_log($t, qr/\[emerg\].*crawlward_budget_zone "tiny" is too small/, 1, 10),
	'a reload that fails after the zone\'s init: refused');
is(join(' ', sort(worker_pids($t))), join(' ', sort(@pids)), 'the failed reload: the same workers');
is(status(get('/', ua => $BOT)), 429, 'the failed reload: the spent budget is kept');
is(scalar(error_log_lines($t, $relaid)), 1, 'the failed reload: the table is not laid out again');

# the same catalogue, the reload succeeds: its workers lay the table out

# (a request an old worker has begun, ended after the new workers laid the
# table out: that worker counts nothing more in it, and says so)

conf($t, 'crawlward_zone zone=c:64k; crawlward_budget_zone zone=x:4m lag=off;',
	'crawlward_budget zone=x address=2r/m,2r/m;');
my $begun = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . port(8080)) or die "connect: $!";
$begun->autoflush(1);
print $begun "GET / HTTP/1.0\r\nHost: localhost\r\nUser-Agent: $BOT\r\n";
select undef, undef, undef, 0.2;
reload_workers($t);
ok(wait_error_log($t, $relaid, 2, 5), 'the reload succeeds: the new workers lay the table out again');
print $begun "\r\n";
my $late = do { local $/; <$begun> } // '';
like($late, qr/^HTTP\/1\.1 200/, 'an old worker\'s last request: answered');
ok(wait_error_log($t, qr/\[notice\].*crawlward_budget_zone "x": laid out again by a newer configuration's workers; this worker of the previous one counts nothing more in it/, 1, 5),
	'an old worker\'s last request: counted nowhere, said once');
is(join(' ', map { status(get('/', ua => $BOT)) } 1 .. 3), '200 200 429',
	'the reload succeeds: the budgets start over');

is(scalar(error_log_lines($t, qr/\[(?:alert|crit)\]/)), 0, 'no alert in the error log');

###############################################################################
