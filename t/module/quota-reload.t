#!/usr/bin/perl

# A quota zone over reloads: an account entry and the zone's counts hold a
# tier by its place among the API tiers, so a reload with the same tiers
# keeps the quotas spent, and a reload that reorders them lays the zone out
# again (a notice says so) and the quotas start over, rather than showing
# an account under another tier's name and limits. With
# t/policies/quota.yaml (standard: 5 an hour; partner: 100 an hour, 4 a day).

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req/)->plan(8);

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

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub acme {
	my ($i) = @_;
	return get('/api/items', ua => $BROWSER, xff => "192.0.2.$i", headers => [ 'X-API-Key: acme-key-1' ]);
}

sub acme_in_status {
	my $st = module_status('/crawlward-status');
	my ($q) = @{ $st->{quotas} || [] };
	my ($acme) = grep { $_->{account} eq 'acme' } @{ $q->{top_accounts} || [] };
	return $acme ? "$acme->{tier} $acme->{hourly} $acme->{last_hour}" : 'none';
}

is(join(' ', map { status(acme($_)) } 1 .. 6), '200 200 200 200 200 429', 'acme: its five an hour, then 429');
is(acme_in_status(), 'standard 5 5', 'status: acme, standard, 5 of 5');

# the same tiers: the zone is kept, with acme's hour spent
reload_workers($t);
is(status(acme(7)), 429, 'reload with the same tiers: acme\'s quota stays spent');

# the tiers reordered (partner first): the zone is laid out again
my $http = "$dir/crawlward-http.conf";
open my $in, '<', $http or die "$http: $!";
my $conf = join '', <$in>;
close $in;
my ($standard) = $conf =~ /^(crawlward_api_tier standard [^\n]*\n)/m;
my ($partner) = $conf =~ /^(crawlward_api_tier partner [^\n]*\n)/m;
ok($standard && $partner && $conf =~ s/\Q$standard$partner\E/$partner$standard/, 'the rendered tiers, swapped');
open my $out, '>', $http or die "$http: $!";
print $out $conf;
close $out;
reload_workers($t);
ok(wait_error_log($t, qr/crawlward_budget_zone "crawlward_quota": the API tiers or the zone's sync= changed, so the quotas start over/, 1, 5),
	'a notice: the API tiers changed, the quotas start over');
my $again = acme(8);
is(status($again), 200, 'acme starts over');
is(header($again, 'RateLimit-Policy'), '"hourly";q=5;w=3600', 'still the standard tier, by name');
is(acme_in_status(), 'standard 5 1', 'status: acme under standard, one request in the new zone');

###############################################################################
