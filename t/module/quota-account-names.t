#!/usr/bin/perl

# ngx_http_crawlward_module: how an account variable's names are compared
# (crawlward_quota account_names=). By default exactly, as auth_basic
# compares user names: erin and ERIN are two users, and ERIN cannot spend
# erin's quota. With account_names=folded, for a sign-in that ignores case
# and spaces and passes on what was typed (an LDAP or a database behind
# auth_request; here a password file that lists the spellings), ERIN,
# " erin" and Erin are erin, with one quota, not one a spelling. The status
# and the access log show the folded name.

use warnings;
use strict;

use Test::More;

use MIME::Base64 qw/ encode_base64 /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req auth_basic/)
	->plan(10);

my $dir = render($t, 't/policies/quota.yaml');
my $d = $t->testdir();
write_page($t);
# a sign-in that takes any spelling of erin's name
$t->write_file('htpasswd', join '', map { "$_:{PLAIN}pw\n" } ('erin', 'ERIN', 'Erin', ' erin', 'erin  '));

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    # the sign-in that folds the spellings: a zone of its own
    crawlward_budget_zone zone=folded:1m;

    log_format fields '\$request_uri \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/fields.log fields;

        location /members/ {
            auth_basic "members";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=crawlward_quota account=\$remote_user default=standard;
            root $d/www;
            try_files /page.html =404;
        }

        location /folded/ {
            auth_basic "members";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=folded account=\$remote_user account_names=folded default=standard;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub as {
	my ($name, $uri) = @_;
	my $auth = 'Authorization: Basic ' . encode_base64("$name:pw", '');
	return get($uri, ua => $BROWSER, xff => '192.0.2.7', headers => [ $auth ]);
}

sub statuses {
	return join ' ', map { status($_) // 'none' } @_;
}

# the standard tier: 5 an hour. Exact by default: each user its own quota
my @r = (map({ as('erin', "/members/$_") } 1 .. 5), as('ERIN', '/members/6'), as('Erin', '/members/7'));
is(statuses(@r), '200 200 200 200 200 200 200', 'exact: erin\'s five, and ERIN and Erin their own');
like(header($r[5], 'RateLimit') // '', qr/^"hourly";r=4;/, 'ERIN: a quota of its own, untouched by erin');
is(status(as('erin', '/members/8')), 429, 'erin past hers: 429');
my ($q) = grep { $_->{zone}{name} eq 'crawlward_quota' } @{ module_status('/crawlward-status')->{quotas} || [] };
is(join(' ', sort map { "$_->{account}:$_->{last_hour}" } @{ $q->{top_accounts} || [] }), 'ERIN:1 Erin:1 erin:5',
	'status: three accounts where names are exact');

# folded: every spelling is erin
@r = (map({ as('erin', "/folded/$_") } 1 .. 2), as('ERIN', '/folded/3'), as(' erin', '/folded/4'), as('Erin', '/folded/5'));
is(statuses(@r), '200 200 200 200 200', 'folded: erin, ERIN, " erin" and Erin, five requests');
like(header($r[4], 'RateLimit') // '', qr/^"hourly";r=0;/, 'Erin\'s request spent the fifth of one quota');
is(statuses(as('erin  ', '/folded/6'), as('erin', '/folded/7')), '429 429', 'past it, under any spelling: 429');
my ($f) = grep { $_->{zone}{name} eq 'folded' } @{ module_status('/crawlward-status')->{quotas} || [] };
is(join(' ', map { "$_->{account}:$_->{last_hour}" } @{ $f->{top_accounts} || [] }), 'erin:5',
	'status: one account, erin, with the five');

$t->stop();
my @fields = file_lines("$d/fields.log");
is(scalar(grep { m!^/members/\d+ .* account=ERIN tier=standard source=variable$! } @fields), 1,
	'access log: ERIN as sent where names are exact');
is(scalar(grep { m!^/folded/\d+ .* account=erin tier=standard source=variable$! } @fields), 7,
	'access log: every request at /folded/ under the folded name');

###############################################################################
