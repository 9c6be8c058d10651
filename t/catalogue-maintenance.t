# catalogue.yaml maintenance: while the flag file exists every page answers 503 with Retry-After 300, robots.txt keeps answering 200 with the rendered file; no reload needed.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(27);

my $dir = render($t, 'nginx-conf/catalogue.yaml');
my $d = $t->testdir();
my $flag = flag_file($t);
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

my $robots = rendered_file($t, 'robots.txt');

is($flag, "$d/var/www/heratio/storage/framework/down",
	'the flag file is under --root');
ok(!-e $flag, 'no flag file at start');

my $r = get('/record/1', ua => BROWSER);
is(status($r), 200, 'no flag: /record/1 200');
is(body($r), PAGE, 'no flag: the page');

# maintenance on: nginx tests the file on each request

open(my $fh, '>', $flag) or die "Can't create $flag: $!\n";
close $fh;

$r = get('/record/1', ua => BROWSER);
is(status($r), 503, 'flag: /record/1 503');
is(header($r, 'Retry-After'), '300', 'flag: /record/1 Retry-After 300');

$r = get('/glam/browse', ua => BROWSER);
is(status($r), 503, 'flag: /glam/browse 503');
is(header($r, 'Retry-After'), '300', 'flag: /glam/browse Retry-After 300');

$r = get('/api/v1/x', ua => 'python-requests/2.31.0');
is(status($r), 503, 'flag: /api/v1/x 503');
is(header($r, 'Retry-After'), '300', 'flag: /api/v1/x Retry-After 300');

$r = get('/record/1', ua => $GOOGLEBOT);
is(status($r), 503, 'flag: Googlebot on /record/1 503');

$r = get('/robots.txt', ua => $GOOGLEBOT);
is(status($r), 200, 'flag: Googlebot on /robots.txt 200');
is(body($r), $robots, 'flag: robots.txt is the rendered file');
is(header($r, 'Retry-After'), undef, 'flag: robots.txt has no Retry-After');

$r = get('/robots.txt', ua => 'python-requests/2.31');
is(status($r), 200, 'flag: python-requests on /robots.txt 200');
is(body($r), $robots, 'flag: python-requests gets robots.txt');

# only /robots.txt itself is exempt
$r = get('/robots.txt.bak', ua => BROWSER);
is(status($r), 503, 'flag: /robots.txt.bak 503');

# maintenance is not throttling: nothing in the throttle log
is(scalar(log_lines($t)), 0, 'flag: no throttle log line for 503s');

# maintenance off

unlink $flag or die "Can't remove $flag: $!\n";

$r = get('/record/1', ua => BROWSER);
is(status($r), 200, 'flag removed: /record/1 200');
is(body($r), PAGE, 'flag removed: the page');
is(header($r, 'Retry-After'), undef, 'flag removed: no Retry-After');

$r = get('/glam/browse', ua => BROWSER);
is(status($r), 200, 'flag removed: /glam/browse 200');

$r = get('/api/v1/x', ua => 'python-requests/2.31.0');
is(status($r), 200, 'flag removed: /api/v1/x 200');

$r = get('/robots.txt', ua => $GOOGLEBOT);
is(status($r), 200, 'flag removed: /robots.txt 200');
is(body($r), $robots, 'flag removed: robots.txt');

# on again, once more: the state follows the file both ways

open($fh, '>', $flag) or die "Can't create $flag: $!\n";
close $fh;

$r = get('/record/1', ua => BROWSER);
is(status($r), 503, 'flag again: /record/1 503');
unlink $flag or die "Can't remove $flag: $!\n";

is(status(get('/record/1', ua => BROWSER)), 200, 'flag gone again: 200');

###############################################################################
