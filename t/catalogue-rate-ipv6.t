#!/usr/bin/perl

# catalogue.yaml layer 4, the rate classes' key: a client's address, an
# IPv6 one by its /64 (one subscriber's network, in which a client can take
# a new address for every request, and so never be counted twice), an IPv4
# address that an IPv6 socket maps as the IPv4 address. The addresses come
# through realip from 127.0.0.1, as from a trusted proxy.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn realip/)
	->plan(8);

my $dir = render($t, 'nginx-conf/catalogue.yaml');
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

        set_real_ip_from 127.0.0.1;
        real_ip_header X-Forwarded-For;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        # the site's own regex location, whose capture its content reads
        location ~ ^/cap/(.+)\$ {
            root $d/www;
            try_files /page.html =404;
            add_header X-Cap "[\$1]" always;
        }
    }
}

EOF

$t->run();

###############################################################################

# the search class: 20r/m, burst 10: the first request and 10 more pass at once
sub searches {
	my ($n, $from) = @_;
	return join ' ', map { status(get('/search?q=letters', ua => BROWSER, xff => $from)) // 'none' } 1 .. $n;
}

is(searches(11, '2001:db8:1:2::1'), join(' ', (200) x 11), 'search from 2001:db8:1:2::1: 1 + burst 10 answer 200');
is(searches(1, '2001:db8:1:2::1'), '429', 'the 12th: 429');
is(searches(1, '2001:db8:1:2:ffff:ffff:ffff:fffe'), '429', 'another address of the same /64: 429, the same client');
is(searches(1, '2001:db8:1:3::1'), '200', 'an address of another /64: 200');

is(searches(11, '192.0.2.20'), join(' ', (200) x 11), 'search from 192.0.2.20: 1 + burst 10 answer 200');
is(searches(1, '::ffff:192.0.2.20'), '429', 'the same address mapped to IPv6: 429, the same client');

# the key's expression keeps its captures to itself: a regex location's $1 is the location's
is(header(get('/cap/abc', ua => BROWSER, xff => '2001:db8:1:9::1'), 'X-Cap'), '[abc]',
	'an IPv6 client: the location\'s $1 is its own');
is(header(get('/cap/abc', ua => BROWSER, xff => '::ffff:192.0.2.30'), 'X-Cap'), '[abc]',
	'a mapped IPv4 client: the same');

###############################################################################
