#!/usr/bin/perl

# A filter's own error answer keeps the request's decision. nginx clears
# every module's context when a filter answers with an error of its own
# (ngx_http_filter_finalize_request: here the 412 of an If-Match that the
# static file's ETag does not match), without making the request internal.
# The module finds its decision again for the log phase: the access log
# shows the rung and score the ladder gave the request, and the ladder
# counts it once.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http/)->plan(6);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-filter-error
  throttle_log: /var/log/nginx/filter-error-throttled.log
robots: {}
module:
  status: /crawlward-status
classifier:
  mode: observe
  window: 1m
  zone_size: 32k
  cookie: {enabled: false}
EOF
my $dir = render($t, "$d/policy.yaml");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    log_format fields 'status=\$status rung=\$crawlward_rung score=\$crawlward_score';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        access_log $d/fields.log fields;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $MISMATCH = 'If-Match: "no-such-etag"';
my @codes = map {
	status(get("/record/$_", ua => BROWSER, headers => [ $MISMATCH ])) // '-'
} 1 .. 4;
is("@codes", '412 412 412 412',
	'a stale If-Match: 412, the not-modified filter\'s own answer');
is(status(get('/record/5', ua => BROWSER)), 200, 'without it: 200');

ok(wait_file_lines("$d/fields.log", 5), 'nginx logged the five requests');
my @lines = file_lines("$d/fields.log");

is(scalar(grep { /^status=412 rung=L\d score=\d\.\d\d$/ } @lines), 4,
	'each 412 is logged with the rung and score the ladder gave it')
	or diag(join("\n", @lines));
like($lines[4], qr/^status=200 rung=L\d score=\d\.\d\d$/, 'as the 200 is')
	or diag($lines[4]);

my $st = module_status('/crawlward-status', ua => BROWSER);
my $placed = 0;
$placed += $_->{requests} // 0 for @{ $st->{ladder}{rungs} || [] };
is($placed, 5, 'the ladder counts the five requests once each')
	or diag(explain($st->{ladder}));

###############################################################################
