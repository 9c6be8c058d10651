# preferences: robots.txt says the site's preferences for the use of its content (Content-Usage from the actions, a path's own, Content-Signal, License), and with preferences.header every response carries the Content-Usage of its path.

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
	->plan(14);

my $d = $t->testdir();

# the shipped catalogue policy (ai-training blocked, search allowed), with
# a path of its own and the header
my $policy = slurp(repo_root() . '/nginx-conf/catalogue.yaml');
$policy .= <<'EOF';

preferences:
  paths:
    - {path: /research/, search: n}
  content_signal: true
  license: https://heratio.org/licence.xml
  header: true
EOF
$t->write_file('policy.yaml', $policy);

my $dir = render($t, "$d/policy.yaml");
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

my $r = get('/robots.txt', ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 200, 'robots.txt: 200');
my $robots = body($r);
like($robots, qr/^Crawl-delay: 10\nContent-Usage: search=y, train-ai=n\n/m,
	"robots.txt: the site's preferences, from the actions, in the * group");
like($robots, qr/^Content-Usage: \/research\/ search=n, train-ai=n$/m,
	"robots.txt: the path's own");
like($robots, qr/^Content-Signal: search=yes, ai-input=yes, ai-train=no$/m,
	'robots.txt: the Content-Signal line');
like($robots, qr/^License: https:\/\/heratio\.org\/licence\.xml\nSitemap: /m,
	'robots.txt: the License line, before the sitemap');
like($robots, qr/^User-agent: GPTBot$/m, 'robots.txt: the refused crawlers still have their group');
is(header($r, 'Content-Usage'), 'search=y, train-ai=n', 'robots.txt: the header');

$r = get('/record/1', ua => BROWSER);
is(status($r), 200, 'a page: 200');
is(header($r, 'Content-Usage'), 'search=y, train-ai=n', "a page: the site's preferences");

$r = get('/research/paper/7', ua => BROWSER);
is(status($r), 200, 'a research page: 200');
is(header($r, 'Content-Usage'), 'search=n, train-ai=n', "a research page: the path's own");

$r = get('/researchers', ua => BROWSER);
is(header($r, 'Content-Usage'), 'search=y, train-ai=n', 'a path that only starts like it: the site\'s');

$r = get('/record/1', ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 200, 'Googlebot: 200');
is(header($r, 'Content-Usage'), 'search=y, train-ai=n', 'Googlebot: the header too');

###############################################################################

sub slurp {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "Can't read $file: $!\n";
	local $/;
	return scalar <$fh>;
}

###############################################################################
