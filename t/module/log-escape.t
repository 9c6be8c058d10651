#!/usr/bin/perl

# ngx_http_crawlward_module's error-log lines escape what the client wrote
# (issue 9, point 10): a User-Agent whose product token holds '"' or '\',
# refused by a crawl budget, is logged with \xHH, so it cannot close the
# quoted agent field and forge the fields after it.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $EVIL = 'Evil"bot/1 verdict verified';
my $SLASH = 'Back\\slashbot/1 (+"x")';

my $t = Test::Nginx->new()->has(qw/http realip/)->plan(6);

my $dir = render($t, 't/policies/module.yaml');
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

    crawlward_budget_zone zone=b:1m;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;
        set \$crawlward_maintenance "";

        location / {
            crawlward_budget zone=b address=1r/m,1r/m;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

is(join(' ', map { status(get('/', ua => $EVIL, from => '127.0.0.3')) } 1 .. 2),
	'200 429', 'Evil"bot: 200, then 429 from its address budget');
is(join(' ', map { status(get('/', ua => $SLASH, from => '127.0.0.5')) } 1 .. 2),
	'200 429', 'a token with a backslash: 200, then 429');

my ($evil) = wait_error_log($t, qr/refused with 429 \(budget address\): agent "Evil/);
like($evil // '', qr/agent "Evil\\x22bot", verdict unverified, retry after \d+s, client: 127\.0\.0\.3,/,
	'the quote is logged as \x22, the fields after it are the module\'s');
unlike(join("\n", error_log_lines($t)), qr/agent "Evil"bot/, 'no raw quote in an agent field');

my ($slash) = wait_error_log($t, qr/refused with 429 \(budget address\): agent "Back/);
like($slash // '', qr/agent "Back\\x5Cslashbot", verdict unverified,/,
	'the backslash as \x5C');
is(scalar(grep { !/agent "(?:[^"\\]|\\x[0-9A-F]{2})*", verdict/ }
	error_log_lines($t, qr/crawlward: refused/)),
	0, 'every refusal line: a quote or backslash in an agent field only as \xHH');

###############################################################################
