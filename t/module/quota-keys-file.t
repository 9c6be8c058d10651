#!/usr/bin/perl

# ngx_http_crawlward_module: a keys file (crawlward_api_keys) changed in a
# way its modification time and size do not show (written in place with one
# key's hash for another, then its modification time set back, as a copy
# that keeps times does) is read again all the same: the revoked key names no
# account within a second, the new one does. A keys file that is removed
# keeps the keys read before, and the error log says so once.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ sleep /;
use Digest::SHA qw/ sha256_hex /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req/)
	->plan(7);

my $dir = render($t, 't/policies/quota.yaml');
write_page($t);
my $keys = "$dir/crawlward-api-keys.json";
# a whole second, which perl's utime sets exactly (it drops fractions), so that the
# modification time put back below is the very one nginx read
my $T = time() - 60;
utime($T, $T, $keys) or die "utime: $!";

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
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub api {
	my ($key, $xff) = @_;
	return get('/api/items', ua => $BROWSER, xff => $xff, headers => [ "X-API-Key: $key" ]);
}

my ($old, $new) = (sha256_hex('acme-key-1'), sha256_hex('acme-key-9'));

like(header(api('acme-key-1', '192.0.2.1'), 'RateLimit') // '', qr/^"hourly";r=4;/, 'acme-key-1 names acme');

# acme-key-1 revoked for acme-key-9: the same size, written in place, the
# modification time set back to what it was
my @st = stat($keys) or die "$keys: $!";
die "$keys: not the time set" unless $st[9] == $T;
open my $fh, '<', $keys or die "$keys: $!";
my $json = do { local $/; <$fh> };
close $fh;
$json =~ s/$old/$new/ or die "no $old in $keys";
sleep(1.1);
open $fh, '+<', $keys or die "$keys: $!";
print $fh $json;
close $fh;
utime($st[8], $st[9], $keys) or die "utime: $!";
my @now = stat($keys);
is(join(' ', $now[7], $now[9]), join(' ', $st[7], $T), 'the file has its old size and modification time, to the nanosecond (a whole second)');
sleep(1.2);

is(header(api('acme-key-1', '192.0.2.2'), 'RateLimit'), undef, 'the revoked acme-key-1 names no account within a second');
like(header(api('acme-key-9', '192.0.2.3'), 'RateLimit') // '', qr/^"hourly";r=3;/, 'acme-key-9 names acme, with its quota');
ok(wait_error_log($t, qr/crawlward_api_keys: read ".*crawlward-api-keys\.json" again: 4 keys/), 'error log: the keys read again');

# removed: the keys read before still hold, said once
unlink $keys or die "unlink: $!";
sleep(1.2);
api('acme-key-9', '192.0.2.4');
sleep(1.1);
like(header(api('acme-key-9', '192.0.2.5'), 'RateLimit') // '', qr/^"hourly";r=1;/, 'the file removed: acme-key-9 still names acme');
my @gone = grep { /crawlward_api_keys: ".*crawlward-api-keys\.json" is gone; the keys read before still hold/ } split /\n/, $t->read_file('error.log');
is(scalar(@gone), 1, 'error log: the file gone, said once');

###############################################################################
