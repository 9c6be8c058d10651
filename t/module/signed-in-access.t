#!/usr/bin/perl

# Signed in by what the access phase checked: `crawlward_budget_signed_in`
# names a variable that auth_request sets (auth_request_set), which nginx
# fills only in the access phase, after every preaccess handler. The ladder
# and the budgets of such a location decide after it, so a signed-in person
# is L0 and never counted, and a made-up token or header signs no one in.
# (nginx 1.28 as ci/build-module vendors it has no auth_request: skipped
# there; ladder.t runs the same path on both versions with $remote_user.)
# A request the access phase refuses is still counted in its client's
# window, in the log phase.

use warnings;
use strict;

use Test::More;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip auth_request proxy rewrite/)
	->plan(15);

my $KEY = 'test-key-0123456789abcdef0123456789abcdef';
my $d = $t->testdir();
write_page($t);
$t->write_file('cookie.key', "$KEY\n");
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-signed-in
  throttle_log: /var/log/nginx/signed-in-throttled.log
robots: {}
module:
  status: /crawlward-status
classifier:
  mode: enforce
  window: 1m
  zone_size: 32k
  cookie:
    key_file: $d/cookie.key
    lifetime: 1h
  bucket: {burst: 3, rate: 1r/m}
  challenges: {L3: refuse, L4: refuse, L5: refuse}
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

    crawlward_budget_zone zone=repo:1m;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Rung \$crawlward_rung always;
        add_header X-Budget \$crawlward_budget always;

        # the application answers 200 to everyone, with X-User for a
        # signed-in person (docs/module.md's crawlward_budget_signed_in)
        auth_request /_session;
        auth_request_set \$signed_in \$upstream_http_x_user;
        crawlward_budget_signed_in \$signed_in;

        location / {
            crawlward_budget zone=repo address=2r/m,2r/m agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }

        location /private/ {
            deny all;
        }

        # its error page in a location where crawlward is off
        location /hidden/ {
            deny all;
            error_page 403 /denied;
        }

        location = /denied {
            internal;
            crawlward off;
            return 403 "denied\n";
        }

        # ... and where it is on, with a budget
        location /guarded/ {
            deny all;
            error_page 403 /denied-page;
        }

        # a path the rewrite phase sends to the application through an error page: the
        # application's answer to the client's request, decided and limited as any
        location /legacy/ {
            if (\$uri ~ ^/legacy/) {
                return 404;
            }
            error_page 404 = \@app;
        }

        location \@app {
            crawlward_budget zone=repo address=2r/m,2r/m agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }

        location = /denied-page {
            internal;
            crawlward_budget zone=repo address=2r/m,2r/m agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            root $d/www;
            try_files /page.html =404;
        }

        location = /_session {
            internal;
            crawlward off;
            proxy_pass http://127.0.0.1:%%PORT_8080%%/_whoami;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }

        location = /_whoami {
            auth_request off;
            crawlward off;
            if (\$http_authorization = "Bearer alice-token") {
                add_header X-User alice;
                return 200;
            }
            return 200;
        }
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $BOT = 'Mozilla/5.0 (compatible; Gitbot/1.0; +https://example.net/bot)';

sub answers {
	my ($n, %o) = @_;
	my @headers = defined $o{token} ? ("Authorization: Bearer $o{token}") : ();
	push @headers, @{ $o{headers} || [] };
	my (@status, $rung);
	for (1 .. $n) {
		my $r = get("/repo/$_", ua => $o{ua}, xff => $o{from}, headers => \@headers);
		push @status, status($r) // 'none';
		$rung = header($r, 'X-Rung');
	}
	return (join(' ', @status), $rung);
}

# the crawl budget: a signed-in script is never counted
my ($out) = answers(5, ua => $BOT, from => '192.0.2.1', token => 'alice-token');
is($out, '200 200 200 200 200', 'budget: a crawler signed in through auth_request is not counted');
($out) = answers(3, ua => $BOT, from => '192.0.2.2');
is($out, '200 200 429', 'budget: the same crawler, not signed in: 2, then 429');
($out) = answers(3, ua => $BOT, from => '192.0.2.3', token => 'made-up',
	headers => [ 'X-User: alice' ]);
is($out, '200 200 429', 'budget: a made-up token signs no one in');

# the ladder: a signed-in person is L0, never tracked, never refused
my $rung;
($out, $rung) = answers(8, ua => $CHROME, from => '198.51.100.1', token => 'alice-token');
is($out, '200 200 200 200 200 200 200 200', 'ladder: a signed-in person: 8 pages, none refused');
is($rung, 'L0', 'ladder: at L0');
($out, $rung) = answers(8, ua => $CHROME, from => '198.51.100.2');
like($out, qr/^200 200 200 (200 )*429/, 'ladder: the same person, not signed in: the bucket refuses');
ok($rung && $rung ne 'L0', "ladder: not at L0 ($rung)");
($out) = answers(8, ua => $CHROME, from => '198.51.100.3', token => 'made-up');
like($out, qr/429/, 'ladder: a made-up token: refused as anyone');

# a request the access phase refuses never reaches the precontent phase:
# its client's window counts it in the log phase, refusing nothing
is(join(' ', map { status(get("/private/$_", ua => $CHROME, xff => '198.51.100.9')) // 'none' } 1 .. 4),
	'403 403 403 403', 'the access phase refuses 4 requests');
is(status(get('/repo/1', ua => $CHROME, xff => '198.51.100.9')), 429,
	'they counted: the client\'s bucket is spent, 429 on its next page');
# also when its error page is in a location where crawlward is off
my $counted = sub { my $l = module_status('/crawlward-status')->{ladder}; my $n = 0; $n += $_->{requests} for @{ $l->{rungs} || [] }; $n };
my $before = $counted->();
is(join(' ', map { status(get("/hidden/$_", ua => $CHROME, xff => '198.51.100.10')) // 'none' } 1 .. 3),
	'403 403 403', 'refused, with an error page where crawlward is off');
is($counted->() - $before, 3, 'the ladder counted the three');

# ... and when its error page is in a location where crawlward is on, with a budget: the
# error page is no request of the client's, and neither the ladder nor the budget answers it
# (they answered 429 once the address's 2 a minute were spent, instead of the 403)
is(join(' ', map { status(get("/guarded/$_", ua => $BOT, xff => '192.0.2.40')) // 'none' } 1 .. 4),
	'403 403 403 403', 'refused, with an error page where a budget is: 403, never the budget\'s 429');

# ... but an error page that serves the client's request (error_page 404 = @app) is limited
# as any: the budget's 2 a minute, then 429
is(join(' ', map { status(get("/legacy/$_", ua => $BOT, xff => '192.0.2.41')) // 'none' } 1 .. 3),
	'200 200 429', 'the application through an error page: limited as any request');

my $st = module_status('/crawlward-status');
cmp_ok($st->{ladder}{untracked_requests} // 0, '>=', 13, 'status: the signed-in requests, untracked');

###############################################################################
