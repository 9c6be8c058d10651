#!/usr/bin/perl

# ngx_http_crawlward_module's API quotas per account (heratio.org's layer 4,
# api_tiers): a keys file with three accounts in two tiers; a second key of
# the same account shares its quota; the hourly and the daily window each
# refuse with 429, Retry-After and the IETF RateLimit-Policy / RateLimit
# fields, which every metered answer carries; a made-up key, a made-up
# Basic user and a made-up X-Account header get the door's per-address
# rate class and no quota; with auth_basic, the account is the checked
# user, and a wrong password never spends the real account's quota (an
# auth_request answer: quota-auth-request.t); the
# keys file is read again when a render changes it, without a reload; the
# status endpoint, Prometheus and the access log show the accounts.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ sleep /;
use MIME::Base64 qw/ encode_base64 /;

use Test::Nginx qw/ port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req auth_basic/)
	->plan(60);

my $dir = render($t, 't/policies/quota.yaml');
my $d = $t->testdir();
write_page($t);
# acme: a user who signed up under the name the keys file gives a partner
$t->write_file('htpasswd', "carol:{PLAIN}s3cret\nacme:{PLAIN}pw\n");

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    # a second quota zone: its own accounts, under the same metric families
    crawlward_budget_zone zone=second_quota:1m;

    log_format quota '\$request_uri account=\$crawlward_account tier=\$crawlward_tier status=\$status';
    log_format fields '\$request_uri \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/quota.log quota;
        # names an application may read as X-API-Key reach it
        ignore_invalid_headers off;
        access_log $d/fields.log fields;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        # accounts by the user auth_basic checked: the rendered keys=on
        # quota replaced by one on \$remote_user
        location /members/ {
            auth_basic "members";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=crawlward_quota account=\$remote_user default=standard;
            root $d/www;
            try_files /page.html =404;
        }

        location /partners/ {
            auth_basic "partners";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=second_quota account=\$remote_user default=standard;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub api {
	my ($uri, $key, %o) = @_;
	my @h = defined $key ? ("X-API-Key: $key") : ();
	push @h, @{ $o{headers} || [] };
	return get($uri, ua => $BROWSER, xff => $o{xff} // '192.0.2.1', headers => \@h);
}

sub statuses {
	return join ' ', map { status($_) // 'none' } @_;
}

# acme: two keys, one quota of 5 an hour (standard), whatever address it comes from
my @r = (map({ api('/api/items', 'acme-key-1', xff => "192.0.2.1$_") } 1 .. 3),
	map({ api('/api/items', 'acme-key-2', xff => "198.51.100.$_") } 1 .. 2));
is(statuses(@r), '200 200 200 200 200', 'acme: five requests with two keys from five addresses, none meets the rate class');
is(header($r[0], 'RateLimit-Policy'), '"hourly";q=5;w=3600', 'RateLimit-Policy: the standard tier');
like(header($r[0], 'RateLimit') // '', qr/^"hourly";r=4;t=\d+$/, 'RateLimit: 4 left after the first');
# t: when more is left than now; a request of this hour frees only once the hour has
# ended, then slides out over the next (an hour for the first alone)
my ($more) = (header($r[0], 'RateLimit') // '') =~ /;t=(\d+)$/;
ok(($more // 0) > 3600 && $more <= 7200, 't after the first: the rest of the hour and an hour more (' . ($more // 'none') . ' s)');
like(header($r[4], 'RateLimit') // '', qr/^"hourly";r=0;t=\d+$/, 'RateLimit: none left after the fifth');
my $over = api('/api/items', 'acme-key-2', xff => '203.0.113.9');
is(status($over), 429, 'acme: the sixth request, with its second key from a new address: 429');
like(header($over, 'Retry-After') // '', qr/^\d+$/, 'the 429 carries Retry-After');
# the sliding estimate takes the fixed hour's 5 as spread over it: room
# again once a fifth of them has slid out, 12 minutes into the next hour
my $ra = header($over, 'Retry-After') // 0;
ok($ra >= 720 && $ra <= 4320, "Retry-After: once a fifth of the hour's requests has slid out ($ra s)");
like(header($over, 'RateLimit') // '', qr/^"hourly";r=0;t=\d+$/, 'the 429 carries RateLimit too');
is(header($over, 'RateLimit-Policy'), '"hourly";q=5;w=3600', 'and RateLimit-Policy');
ok(wait_error_log($t, qr/crawlward: 429: account "acme" \(tier standard\) is past its hourly quota \(5r\/h\), retry after \d+s/),
	'error log: the account, the tier and the window');

# beta: the same tier, a quota of its own
is(statuses(map { api('/api/items', 'beta-key', xff => '192.0.2.1') } 1 .. 5), '200 200 200 200 200',
	'beta: its own five, from the address acme used');

# gamma: the partner tier, 100 an hour but 4 a day: the daily window refuses
@r = map { api('/api/items', 'gamma-key', xff => '192.0.2.77') } 1 .. 5;
is(statuses(@r), '200 200 200 200 429', 'gamma: four a day, then 429');
is(header($r[0], 'RateLimit-Policy'), '"hourly";q=100;w=3600, "daily";q=4;w=86400', 'RateLimit-Policy: both windows of the partner tier');
like(header($r[0], 'RateLimit') // '', qr/^"hourly";r=99;t=\d+, "daily";r=3;t=\d+$/, 'RateLimit: what is left of each');
$ra = header($r[4], 'Retry-After') // 0;
ok($ra >= 21600 && $ra <= 108000, "the daily refusal: Retry-After of a quarter of a day or more ($ra s)");
ok(wait_error_log($t, qr/account "gamma" \(tier partner\) is past its daily quota \(4r\/d\)/), 'error log: the daily window');

# no account: the door's per-address rate class (1r/m, burst 2), no quota, no RateLimit
@r = map { api('/api/items', 'made-up-key', xff => '192.0.2.50') } 1 .. 4;
is(statuses(@r), '200 200 200 429', 'a made-up key: the rate class of the door (3, then 429)');
is(header($r[0], 'RateLimit'), undef, 'a made-up key: no RateLimit, no quota');
is(header($r[3], 'Retry-After'), '60', 'its 429 is the rate class\'s, with its Retry-After');
my $basic = 'Authorization: Basic ' . encode_base64('acme:whatever', '');
@r = map { api('/api/items', undef, xff => '192.0.2.51', headers => [ $basic ]) } 1 .. 4;
is(statuses(@r), '200 200 200 429', 'a made-up Basic user on the keyed door: the rate class');
is(header($r[0], 'RateLimit'), undef, 'a made-up Basic user: no quota');
@r = map { api('/api/items', undef, xff => '192.0.2.52', headers => [ 'X-Account: beta' ]) } 1 .. 4;
is(statuses(@r), '200 200 200 429', 'a made-up X-Account header: the rate class');
is(header($r[0], 'RateLimit'), undef, 'a made-up X-Account: no quota');
# the key header sent twice, even with two listed keys, names no account (nginx
# 1.23+ joins the two into one value, which is no key; an application may read
# either copy as its key): refused with 400 at the metered door, after the rate
# class, which counts it
@r = map { api('/api/items', undef, xff => '192.0.2.54', headers => [ 'X-API-Key: gamma-key', 'X-API-Key: beta-key' ]) } 1 .. 4;
is(statuses(@r), '400 400 400 429', 'the key header sent twice: 400, and the rate class counts it');
is(header($r[0], 'RateLimit'), undef, 'the key header sent twice: no quota');
ok(wait_error_log($t, qr/crawlward: 400: the key header "X-API-Key" sent more than once/),
	'error log: the key header sent twice');
# a spelling an application reads as the name (PHP reads `.` as `_`, FastCGI
# passes `_` as `-`) is the key header too: alone, the key; beside another, a copy
is(statuses(api('/api/items', undef, xff => '192.0.2.55', headers => [ 'X.API.Key: beta-key', 'X-API-Key: beta-key' ])), '400',
	'X.API.Key beside X-API-Key: the key header sent twice');
my $alias = api('/api/items', undef, xff => '192.0.2.56', headers => [ 'X.Api_Key: beta-key' ]);
is(status($alias) . ' ' . (header($alias, 'RateLimit-Policy') // ''), '429 "hourly";q=5;w=3600',
	'X.Api_Key alone: the key, beta\'s quota, spent');
my $lower = api('/api/items', undef, xff => '192.0.2.55', headers => [ 'x-api-key: beta-key' ]);
is(status($lower), 429, 'the key header in lower case: beta\'s quota, spent');
is(header($lower, 'RateLimit-Policy'), '"hourly";q=5;w=3600', 'the key header in lower case names the account');
is(statuses(map { api('/elsewhere', 'beta-key', xff => '192.0.2.53') } 1 .. 3), '200 200 200',
	'off the metered doors a key is not metered');
is(header(api('/elsewhere', 'beta-key', xff => '192.0.2.53'), 'RateLimit'), undef, 'and gets no RateLimit');

# auth_basic: the checked user is the account; a wrong password is refused before the quota
my $carol = 'Authorization: Basic ' . encode_base64('carol:s3cret', '');
my $wrong = 'Authorization: Basic ' . encode_base64('carol:guess', '');
is(statuses(map { api('/members/x', undef, xff => '192.0.2.60', headers => [ $wrong ]) } 1 .. 8),
	join(' ', ('401') x 8), 'eight wrong passwords for carol: 401');
@r = map { api('/members/x', undef, xff => '192.0.2.61', headers => [ $carol ]) } 1 .. 6;
is(statuses(@r), '200 200 200 200 200 429', 'carol: her five, untouched by the wrong passwords, then 429');
like(header($r[0], 'RateLimit') // '', qr/^"hourly";r=4;/, 'carol: RateLimit from her first request');

# a user named as a keyed account spends a quota of its own, not the keyed acme's
my $namesake = api('/members/x', undef, xff => '192.0.2.62', headers => [ 'Authorization: Basic ' . encode_base64('acme:pw', '') ]);
is(status($namesake), 200, 'the user acme: 200, with the keyed acme past its quota');
like(header($namesake, 'RateLimit') // '', qr/^"hourly";r=4;/, 'the user acme: a quota of its own, one spent');

# the keys file changes (a new render): read again without a reload
my $keys = "$dir/crawlward-api-keys.json";
open my $fh, '<', $keys or die "$keys: $!";
my $json = do { local $/; <$fh> };
close $fh;
# delta-key, by its SHA-256
require Digest::SHA;
my $delta = '{"sha256":"' . Digest::SHA::sha256_hex('delta-key') . '","account":"delta","tier":"partner"},';
$json =~ s/"keys": \[/"keys": [$delta/ or die "no keys list in $keys";
sleep(1.1);
open $fh, '>', "$keys.new" or die "$keys.new: $!";
print $fh $json;
close $fh;
rename "$keys.new", $keys or die "rename: $!";
sleep(1.2);
my @delta = map { api('/api/items', 'delta-key', xff => '192.0.2.70') } 1 .. 2;
like(header($delta[-1], 'RateLimit-Policy') // '', qr/"daily";q=4/, 'a key added to the file counts within a second, no reload');
ok(wait_error_log($t, qr/crawlward_api_keys: read ".*crawlward-api-keys\.json" again: 5 keys/), 'error log: the keys read again');

# a broken file keeps the keys read before
sleep(1.1);
open $fh, '>', "$keys.new" or die "$keys.new: $!";
print $fh "{ not json";
close $fh;
rename "$keys.new", $keys or die "rename: $!";
sleep(1.2);
my $still = api('/api/items', 'beta-key', xff => '192.0.2.71');
is(status($still), 429, 'a broken keys file: beta is still beta (past its quota)');
ok(wait_error_log($t, qr/crawlward_api_keys: .*the keys read before still hold/), 'error log: the broken file');

# carol in the second quota zone too
is(status(get('/partners/x', ua => $BROWSER, xff => '192.0.2.61', headers => [ $carol ])), 200, 'the second quota zone meters carol too');

# the status endpoint and Prometheus
my $st = module_status('/crawlward-status');
my ($q) = @{ $st->{quotas} || [] };
is($q && $q->{zone}{name}, 'crawlward_quota', 'status: the quota zone');
my %tier = map { $_->{tier} => $_ } @{ $q->{tiers} || [] };
is($tier{standard}{refused}, 5, 'status: standard refused 5 (acme, carol, beta three times)');
is($tier{partner}{refused}, 1, 'status: partner refused 1 (gamma)');
is_deeply([ map { "$_->{account}:$_->{source}:$_->{last_hour}" } grep { $_->{account} =~ /^(acme|beta|carol)$/ } @{ $q->{top_accounts} } ],
	[ 'acme:key:5', 'beta:key:5', 'carol:variable:5', 'acme:variable:1' ],
	'status: the top accounts by use over the last hour, the keyed acme apart from the user acme');
is(scalar(grep { $_->{account} eq 'made-up-key' || $_->{account} eq 'whatever' } @{ $q->{top_accounts} }), 0,
	'status: no made-up account');
is($st->{refusals_by_layer}{quota}, 6, 'status: refusals by layer counts the quota\'s 429s, not its 400s');
my $prom = get('/crawlward-status?format=prometheus', ua => undef);
like($prom, qr/^crawlward_quota_refused_total\{zone="crawlward_quota",tier="standard"\} 5$/m, 'prometheus: refusals per tier');
like($prom, qr/^crawlward_quota_account_requests_last_hour\{zone="crawlward_quota",account="acme",source="key"\} 5$/m, 'prometheus: the busiest accounts');
# two quota zones: each family once, its samples together (the text format's rule)
my @types = $prom =~ /^# TYPE (\S+)/mg;
my %seen;
is(join(' ', grep { $seen{$_}++ } @types), '', 'prometheus: each family\'s TYPE once, with two quota zones');
like($prom, qr/^# TYPE crawlward_quota_account_requests_last_hour gauge\n(crawlward_quota_account_requests_last_hour\{[^\n]*\n)*crawlward_quota_account_requests_last_hour\{zone="second_quota",account="carol",source="variable"\} 1$/m,
	'prometheus: both zones\' accounts under the one family');
my ($acme) = grep { $_->{account} eq 'acme' && $_->{source} eq 'key' } @{ $q->{top_accounts} };
is_deeply([ @$acme{qw/ tier hourly quota_used /} ], [ 'standard', 5, 1 ], 'status: acme\'s tier, limit and share of it');

# crawlward top, one screen: the accounts near their quota
my $url = 'http://127.0.0.1:' . port(8080) . '/crawlward-status';
my ($rc, $screen) = run_bounded(20, crawlward_bin(), 'top', $url, '--once');
like($screen, qr/accounts near their quota: acme \[key\] \(standard\) 100%, beta \(standard\) 100%, carol \(standard\) 100%/,
	'top: the accounts at their quota, the keyed acme told from the user acme');

# the access log names the account and tier of metered requests only
$t->stop();
my @log = file_lines("$d/quota.log");
is(scalar(grep { m!^/api/items account=gamma tier=partner status=429$! } @log), 1, 'access log: gamma refused, with its tier');
is(scalar(grep { m!^/api/items account= tier= status=! } @log), 17, 'access log: the requests without an account name none');
my @fields = file_lines("$d/fields.log");
is(scalar(grep { m!^/api/items agent=\S* verdict=\S+ action=\S+ refusal=quota facets=\S* budget=\S* account=gamma tier=partner source=key$! } @fields), 1,
	'$crawlward_log_fields: the account and tier, for analyze');
is(scalar(grep { m!^/members/x .* account=acme tier=standard source=variable$! } @fields), 1,
	'$crawlward_log_fields: the user acme, told from the keyed acme by its source');
is(scalar(grep { m! account=! } grep { m!^/elsewhere! } @fields), 0, '$crawlward_log_fields: nothing for a request not metered');

###############################################################################
