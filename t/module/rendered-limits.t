#!/usr/bin/perl

# The facet guard and the crawl budgets as crawlward render writes them for
# the module (browse_shed and crawl_budget with a module section): 429s with
# exactly one Retry-After, the refusal in the throttle log, the budget's
# signed-in variables, the deep paths from robots.deep_paths.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $BOT = 'Mozilla/5.0 (compatible; Rivetbot/1.0)';
my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/)->plan(14);

my $dir = render($t, 't/policies/module-limits.yaml');
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

        # the rendered budgets are server-wide: this location opts out
        location /open/ {
            crawlward_budget off;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

sub retry_afters {
	my ($r) = @_;
	my @v = ($r // '') =~ /^Retry-After:\s*(\S+)/mgi;
	return join(',', @v);
}

my $r = get('/browse?subjects=1&places=2', ua => $BROWSER);
is(status($r), 429, 'browse page, 2 facets, no Referer: 429');
is(retry_afters($r), '30', 'one Retry-After: 30');
is(status(get('/browse?subjects=1&subjects=2', ua => $BROWSER)), 200,
	'a repeated facet is one facet (the module parses the query)');
is(status(get('/record?subjects=1&places=2', ua => $BROWSER)), 200,
	'not a browse page: no facet rule');
my @log = wait_log($t, qr/refusal=facet facet=facet-no-referer/);
is(scalar @log, 1, 'the throttle log names the facet refusal');

my @codes = map { status(get('/alice/repo/commits', ua => $BOT, xff => '192.0.2.1')) } 1 .. 7;
is("@codes", '200 200 200 200 200 200 429', 'the seventh deep request: 429');
$r = get('/alice/repo/commits', ua => $BOT, xff => '192.0.2.1');
like(retry_afters($r), qr/^\d+$/, 'one Retry-After');
is(status(get('/alice/repo/commits', ua => $BOT, xff => '192.0.2.1',
	headers => [ 'Cookie: session=1' ])), 200, 'signed in (session cookie): not counted');
is(status(get('/alice/repo/commits', ua => $BOT, xff => '192.0.2.1',
	headers => [ 'Authorization: Bearer x' ])), 200, 'signed in (token): not counted');
is(status(get('/alice/repo', ua => $BOT, xff => '192.0.2.1')), 200, 'not a deep path: 200');
@log = wait_log($t, qr/refusal=budget .*budget=address-deep/, 2);
is(scalar @log, 2, 'the throttle log names the budget refusals');

@codes = map { status(get('/open/repo/commits', ua => $BOT, xff => '192.0.2.2')) } 1 .. 8;
is("@codes", '200 200 200 200 200 200 200 200', 'crawlward_budget off: 8 deep requests, all 200');

my $st = module_status('/crawlward-status');
is($st->{budgets}[0]{zone}{name}, 'crawlward_budget', 'status: the rendered budget zone');
is($st->{budgets}[0]{refused}{address}, 2, 'status: two refusals by the address budget');

###############################################################################
