#!/usr/bin/perl

# API quotas with the account and tier from an auth_request answer
# (auth_request_set): the application checks the token and names them; a
# made-up token, even with an X-Account header, is refused by auth_request
# and never spends the account's quota. (nginx 1.28 as ci/build-module
# vendors it has no auth_request: skipped there.)

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req auth_request proxy rewrite/)
	->plan(5);

my $dir = render($t, 't/policies/quota.yaml');
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

        # accounts and tiers from an auth_request answer: the application
        # checks the token and names the account and its tier
        location /partners/ {
            auth_request /_auth;
            auth_request_set \$checked_account \$upstream_http_x_account;
            auth_request_set \$checked_tier \$upstream_http_x_tier;
            crawlward_quota zone=crawlward_quota account=\$checked_account tier=\$checked_tier default=standard;
            root $d/www;
            try_files /page.html =404;
        }

        location = /_auth {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_8080%%/_whoami;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }

        location = /_whoami {
            if (\$http_authorization = "Bearer dave-token") {
                add_header X-Account dave;
                add_header X-Tier partner;
                return 200;
            }
            return 401;
        }

    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub api {
	my ($uri, $key, %o) = @_;
	return get($uri, ua => $BROWSER, xff => $o{xff} // '192.0.2.1', headers => $o{headers} || []);
}

sub statuses {
	return join ' ', map { status($_) // 'none' } @_;
}

my @r;
# auth_request: the account and the tier the application named
@r = map { api('/partners/x', undef, xff => '192.0.2.62', headers => [ 'Authorization: Bearer dave-token' ]) } 1 .. 2;
is(statuses(@r), '200 200', 'dave, checked by auth_request: metered');
is(header($r[1], 'RateLimit-Policy'), '"hourly";q=100;w=3600, "daily";q=4;w=86400', 'the tier auth_request named (partner)');
like(header($r[1], 'RateLimit') // '', qr/"daily";r=2;/, 'dave: two of his four a day spent');
@r = map { api('/partners/x', undef, xff => '192.0.2.63', headers => [ 'Authorization: Bearer made-up', 'X-Account: dave' ]) } 1 .. 3;
is(statuses(@r), '401 401 401', 'a made-up token: 401 from auth_request, nothing metered');
like(header(api('/partners/x', undef, xff => '192.0.2.62', headers => [ 'Authorization: Bearer dave-token' ]), 'RateLimit') // '',
	qr/"daily";r=1;/, 'dave\'s quota untouched by the made-up tokens');


###############################################################################
