#!/usr/bin/perl

# crawlward analyze on the module's access log (install.access_log in
# crawlward_combined): the budget that refused, the facet guard's refusals
# and facet counts, the module's verdicts, all as nginx wrote them.

use warnings;
use strict;

use Test::More;

use JSON::PP;
use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $BOT = SELF_DECLARED_BOT;

my $t = Test::Nginx->new()->has(qw/http map limit_conn limit_req/)
	->plan(12);

my $dir = render($t, 't/policies/analyze.yaml');
my $d = $t->testdir();
my $log = access_log($t);
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
    }
}

EOF

$t->run();

###############################################################################

like(rendered_file($t, 'crawlward-http.conf'),
	qr/log_format crawlward_combined .*urt="\$upstream_response_time" \$crawlward_log_fields';/s,
	'with the module, the format logs the module\'s fields (the facet count and the budget too: t/module/log-fields.t)');

# a self-declared bot: three pages a minute from one address, then 429
my @codes = map { status(get("/record/$_", ua => $BOT)) } 1 .. 5;
is("@codes", '200 200 200 429 429', 'the address budget refuses the fourth');

# a person narrowing a list with three facets and no Referer: the facet guard
is(status(get('/browse?subjects=1&places=2&genres=3', ua => BROWSER)), 429,
	'three facets without a Referer: 429');

# a verified crawler is not counted by the budgets
is(status(get("/record/$_", ua => $GOOGLEBOT, from => '127.0.0.2')), 200,
	"verified Googlebot: 200 ($_)") for 1 .. 4;

ok(wait_file_lines($log, 10), 'nginx wrote ten lines');

my ($status, $out) = run_bounded(60, crawlward_bin(), 'analyze',
	repo_root() . '/t/policies/analyze.yaml', $log,
	'--ranges-dir', repo_root() . '/t/ranges', '--format', 'json');
is($status >> 8, 0, 'no policy mistake: exit 0');
my $r = eval { decode_json($out) } || {};

my %agent = map { $_->{agent} => $_ } @{ $r->{agents} || [] };
is_deeply([ $agent{'unknown-bot'}{refusals},
		$agent{'unknown-bot'}{statuses} ],
	[ { 'budget address' => 2 }, { 200 => 3, 429 => 2 } ],
	'the bot: refused twice by the address budget, as the log says');
is_deeply([ $agent{'(no agent)'}{refusals}, $agent{'(no agent)'}{with_facets} ],
	[ { facet => 1 }, 1 ],
	'the person: one facet refusal, with its facets counted');
is_deeply([ $agent{Googlebot}{verified}, $agent{Googlebot}{statuses} ],
	[ 4, { 200 => 4 } ], 'Googlebot: verified by the module, never refused');
