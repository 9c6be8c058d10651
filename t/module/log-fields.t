#!/usr/bin/perl

# $crawlward_log_fields: the module's part of the crawlward_combined access
# log in one variable. For every kind of request (a person, a facet refusal,
# a self-declared bot until its budget refuses it, verified and spoofed
# Googlebot, no User-Agent, robots.txt, a quote in a bot's User-Agent)
# it writes byte for byte what the six variables write, and the rendered
# format uses it.

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
my $BOT = SELF_DECLARED_BOT;

my $t = Test::Nginx->new()->has(qw/http map limit_conn limit_req/)
	->plan(18);

my $dir = render($t, 't/policies/analyze.yaml');
my $d = $t->testdir();
my $site_log = access_log($t);
write_page($t);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    log_format six 'agent=\$crawlward_agent verdict=\$crawlward_verdict '
        'action=\$crawlward_action refusal=\$crawlward_refusal '
        'facets=\$crawlward_facets budget=\$crawlward_budget';
    log_format one '\$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        access_log $d/six.log six;
        access_log $d/one.log one;

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
	'with the module, the site log\'s format reads the one variable');

my @requests = (
	[ '/record/1', ua => BROWSER ],
	[ '/browse?subjects=1&places=2&genres=3', ua => BROWSER ],
	[ '/browse?subjects=1', ua => BROWSER, referer => 'https://example.org/' ],
	(map { [ "/record/$_", ua => $BOT ] } 1 .. 5),
	[ '/record/2', ua => $GOOGLEBOT, from => '127.0.0.2' ],
	[ '/record/3', ua => $GOOGLEBOT ],
	[ '/record/4', ua => undef ],
	[ '/robots.txt', ua => $BOT ],
	[ '/record/5', ua => "Mozilla/5.0 (compatible; Odd\"bot/1.0)" ],
);
my @codes = map { status(get(@$_)) // '-' } @requests;
is("@codes[3 .. 7]", '200 200 200 429 429',
	'the bot: the address budget refuses the fourth');

my $n = @requests;
ok(wait_file_lines("$d/six.log", $n) && wait_file_lines("$d/one.log", $n)
	&& wait_file_lines($site_log, $n), "nginx wrote $n lines to each log");

my @six = file_lines("$d/six.log");
my @one = file_lines("$d/one.log");
my @site = file_lines($site_log);
for my $i (0 .. $n - 1) {
	is($one[$i], $six[$i], "request $i ($requests[$i][0], status $codes[$i]):"
		. " the one variable as the six");
}

like($six[9], qr/^agent=Googlebot verdict=spoofed action=block-444 refusal=bot-blocker /,
	'spoofed Googlebot: refused by the bot-blocker, as both write it')
	or diag($six[9]);
is(scalar(grep { defined $site[$_] && defined $one[$_]
		&& substr($site[$_], -length($one[$_]) - 1) eq " $one[$_]" } 0 .. $n - 1),
	$n, 'the site log ends each line with the same fields');
