#!/usr/bin/perl

# ngx_http_crawlward_module: an account variable's name is compared without
# ASCII case by default (crawlward_quota account_case=insensitive), so that
# a client whose sign-in takes ERIN and Erin for erin (an LDAP or a database
# that compares without case and passes on what was typed; here a password
# file that lists the three spellings) gets one quota, not one a spelling.
# account_case=sensitive keeps them apart, for a sign-in where they are
# three users. The status and the access log show the folded name.

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
$t->write_file('htpasswd', join '', map { "$_:{PLAIN}pw\n" } qw/erin ERIN Erin/);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    # the sign-in that keeps the spellings apart: a zone of its own
    crawlward_budget_zone zone=cased:1m;

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

        location /cased/ {
            auth_basic "members";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=cased account=\$remote_user account_case=sensitive default=standard;
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

# the standard tier: 5 an hour
my @r = (map({ as('erin', "/members/$_") } 1 .. 2), map({ as('ERIN', "/members/$_") } 3 .. 4), as('Erin', '/members/5'));
is(statuses(@r), '200 200 200 200 200', 'erin, ERIN and Erin: five requests');
like(header($r[4], 'RateLimit') // '', qr/^"hourly";r=0;/, 'Erin\'s request spent the fifth of one quota');
is(statuses(as('ERIN', '/members/6'), as('erin', '/members/7')), '429 429', 'past it, under any spelling: 429');

my ($q) = grep { $_->{zone}{name} eq 'crawlward_quota' } @{ module_status('/crawlward-status')->{quotas} || [] };
is(join(' ', map { "$_->{account}:$_->{last_hour}" } @{ $q->{top_accounts} || [] }), 'erin:5',
	'status: one account, erin, with the five');

# kept apart where the location says the case counts
@r = (map({ as('erin', "/cased/$_") } 1 .. 5), as('ERIN', '/cased/6'), as('Erin', '/cased/7'));
is(statuses(@r), '200 200 200 200 200 200 200', 'account_case=sensitive: erin\'s five, and ERIN and Erin their own');
like(header($r[5], 'RateLimit') // '', qr/^"hourly";r=4;/, 'ERIN: a quota of its own');
is(status(as('erin', '/cased/8')), 429, 'erin past hers: 429');
my ($c) = grep { $_->{zone}{name} eq 'cased' } @{ module_status('/crawlward-status')->{quotas} || [] };
is(join(' ', sort map { "$_->{account}:$_->{last_hour}" } @{ $c->{top_accounts} || [] }), 'ERIN:1 Erin:1 erin:5',
	'status: three accounts where the case counts');

$t->stop();
my @fields = file_lines("$d/fields.log");
is(scalar(grep { m!^/members/\d+ .* account=erin tier=standard source=variable$! } @fields), 7,
	'access log: every request at /members/ under the folded name');
is(scalar(grep { m!^/cased/\d+ .* account=ERIN tier=standard source=variable$! } @fields), 1,
	'access log: ERIN as written where the case counts');

###############################################################################
