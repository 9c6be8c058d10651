# catalogue.yaml's canonical host (site.redirect_hosts: [www.heratio.org]):
# www.heratio.org answers one 301 to https://heratio.org with the path and
# query as sent, before any other rule (maintenance, the bot-blocker, the
# limits); the site's own name is served; crawlward explain says the same.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; '
	. 'GPTBot/1.1; +https://openai.com/gptbot)';

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(25);

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
        server_name  localhost www.heratio.org;

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

sub www {
	my ($uri, %o) = @_;
	return get($uri, host => 'www.heratio.org', ua => BROWSER, %o);
}

my $r = www('/glam/browse?subjects=1&places=2');
is(status($r), 301, 'www: 301');
is(header($r, 'Location'), 'https://heratio.org/glam/browse?subjects=1&places=2',
	'www: to the canonical host, path and query kept');

$r = www('/a%20b/./c?x=%2F&y');
is(header($r, 'Location'), 'https://heratio.org/a%20b/./c?x=%2F&y',
	'www: the path and query as sent, not normalized');

$r = get('/record/1', host => 'WWW.Heratio.ORG:8080', ua => BROWSER);
is(status($r), 301, 'www in capitals with a port: 301');
is(header($r, 'Location'), 'https://heratio.org/record/1',
	'www in capitals with a port: to the canonical host');

$r = get('/record/1', host => 'www.heratio.org.', ua => BROWSER);
is(status($r), 301, 'www with a final dot: 301');

$r = www('/robots.txt');
is(status($r), 301, 'www: robots.txt 301');
is(header($r, 'Location'), 'https://heratio.org/robots.txt',
	'www: robots.txt at the canonical host');

# an absolute-form target names the host in the request line: nginx takes
# that host over the Host header, and the Location carries only the path

$r = get('http://www.heratio.org/glam/browse?sort=a', host => 'heratio.org',
	ua => BROWSER);
is(status($r), 301, 'absolute-form www target: 301');
is(header($r, 'Location'), 'https://heratio.org/glam/browse?sort=a',
	'absolute-form www target: the path and query at the canonical host');

# the site's own name is served as before
$r = get('/record/1', ua => BROWSER);
is(status($r), 200, 'canonical: 200');
is(body($r), PAGE, 'canonical: the page');
is(header($r, 'Location'), undef, 'canonical: no Location');
$r = get('/record/1', host => 'heratio.org', ua => BROWSER);
is(status($r), 200, 'heratio.org: 200');
$r = get('/record/1', host => 'old.www.heratio.org', ua => BROWSER);
is(status($r), 200, 'a name under www.heratio.org is not www.heratio.org: 200');

# before the bot-blocker: GPTBot is told where the site is, and refused there
is(status(www('/record/1', ua => $GPTBOT)), 301, 'www: GPTBot 301');
is(get('/record/1', ua => $GPTBOT), '', 'canonical: GPTBot 444');

# before maintenance: a single 301, then the canonical host's 503
open(my $fh, '>', $flag) or die "Can't create $flag: $!\n";
close $fh;
$r = www('/record/1');
is(status($r), 301, 'maintenance: www 301');
is(header($r, 'Retry-After'), undef, 'maintenance: www no Retry-After');
is(status(get('/record/1', ua => BROWSER)), 503, 'maintenance: canonical 503');
unlink $flag or die "Can't remove $flag: $!\n";

# a 301 is not throttling: nothing in the throttle log
is(scalar(log_lines($t)), 0, 'no throttle log line for 301s');

# crawlward explain says the same
my ($status, $out) = run_bounded(60, crawlward_bin(), 'explain',
	repo_root() . '/nginx-conf/catalogue.yaml', '--ranges-dir',
	repo_root() . '/t/ranges', '--ip', '192.0.2.1', '--url',
	'/glam/browse?subjects=1', '--ua', BROWSER, '--host', 'WWW.heratio.org:443',
	'--format', 'json');
is($status, 0, 'explain --host ran') or diag($out);
like($out, qr/"rule":\s*"canonical-host"/, 'explain: rule canonical-host');
like($out, qr/"status":\s*301/, 'explain: 301');
like($out, qr{301 to https://heratio\.org/glam/browse\?subjects=1},
	'explain: to the canonical host');

###############################################################################
