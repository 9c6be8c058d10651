# catalogue.yaml layer 2, the facet guard on /glam/browse and /actor/browse: 429 with Retry-After 30 for crawlers with 4+ parameters and for 2+ facets without a same-site Referer, logged to the throttle log.

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

# [ uri, ua, referer, expected status, name ]
my @cases;

for my $browse ('/glam/browse', '/actor/browse') {
	push @cases,
		[ "$browse?subjects=1&page=2&sf_culture=en&places=3",
			$GOOGLEBOT, undef, 429,
			"Googlebot, 4 parameters on $browse" ],
		[ "$browse?page=2&sf_culture=en&view=card&topLod=0",
			$GOOGLEBOT, undef, 429,
			"Googlebot, 4 parameters (1 facet) on $browse" ],
		[ "$browse?page=2&sf_culture=en&subjects=1",
			$GOOGLEBOT, undef, 200,
			"Googlebot, 3 parameters on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, undef, 429,
			"browser, 2 facets, no Referer on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'https://heratio.org/glam/browse', 200,
			"browser, 2 facets, Referer heratio.org on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'https://www.heratio.org/actor/browse?page=3', 200,
			"browser, 2 facets, Referer www.heratio.org on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'https://heratio.org.evil.example/', 429,
			"browser, 2 facets, Referer heratio.org.evil.example on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'https://evil.example/?heratio.org', 429,
			"browser, 2 facets, Referer evil.example/?heratio.org on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'https://heratio.org@evil.example/', 429,
			"browser, 2 facets, Referer heratio.org\@evil.example on $browse" ],
		[ "$browse?subjects=1&places=2",
			BROWSER, 'http://heratio.org', 200,
			"browser, 2 facets, Referer http://heratio.org on $browse" ],
		[ "$browse?subjects=1&places=2",
			$GOOGLEBOT, undef, 429,
			"Googlebot, 2 facets, no Referer on $browse" ],
		[ "$browse?subjects=1",
			BROWSER, undef, 200,
			"browser, 1 facet, no Referer on $browse" ],
		[ "$browse?page=2&sf_culture=en&view=card&sort=title",
			BROWSER, undef, 200,
			"browser, 4 parameters (no facet) on $browse" ];
}

# what the application will see: nginx's normalized $uri, and names as PHP
# reads them (a leading space, percent-encoding, a NUL, an array)
push @cases, map { [ $_, BROWSER, undef, 429, "browser, 2 facets as $_" ] }
	'/glam/%62rowse?subjects=1&places=2', '/glam//browse?subjects=1&places=2',
	'/glam/x/../browse?subjects=1&places=2', '/glam/browse?+subjects=1&places=2',
	'/glam/browse?%73ubjects=1&pl%61ces=2', '/glam/browse?subjects%00evil=1&places=2',
	'/glam/browse?subjects[]=1&places[0]=2';

# behind Laravel's front controller (site.front_controller): /index.php/glam/browse
# is /glam/browse to the application, so the same rules; another script's name is not
push @cases,
	[ '/index.php/glam/browse?subjects=1&places=2', BROWSER, undef, 429,
		'browser, 2 facets on /index.php/glam/browse' ],
	[ '/index.php/actor/browse?subjects=1&page=2&sf_culture=en&places=3', $GOOGLEBOT, undef, 429,
		'Googlebot, 4 parameters on /index.php/actor/browse' ],
	[ '/index.php//glam/%62rowse?subjects=1&places=2', BROWSER, undef, 429,
		'browser, 2 facets on /index.php//glam/%62rowse' ],
	[ '/x/../index.php/glam/browse?subjects=1&places=2', BROWSER, undef, 429,
		'browser, 2 facets on /x/../index.php/glam/browse' ],
	[ '/index.php/glam/browse?subjects=1', BROWSER, undef, 200,
		'browser, 1 facet on /index.php/glam/browse' ],
	[ '/index.phpx/glam/browse?subjects=1&places=2', BROWSER, undef, 200,
		'browser, 2 facets on /index.phpx/glam/browse (another path)' ],
	[ '/app/index.php/glam/browse?subjects=1&places=2', BROWSER, undef, 200,
		'browser, 2 facets on /app/index.php/glam/browse (another path)' ];

push @cases,
	[ '/record/1?subjects=1&places=2', BROWSER, undef, 200,
		'browser, 2 facets on a record page (not browse)' ],
	[ '/record/1?a=1&b=2&c=3&d=4&e=5', $GOOGLEBOT, undef, 200,
		'Googlebot, 5 parameters on a record page (not browse)' ];

my @refused = grep { $_->[3] == 429 } @cases;

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(2 * @cases + 6);

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

# from 127.0.0.2, where t/ranges/ puts Google's crawlers: a real Googlebot,
# verified, gets the facet rules all the same (exempt_verified is off)
for my $c (@cases) {
	my ($uri, $ua, $referer, $want, $name) = @$c;
	my $r = get($uri, ua => $ua, referer => $referer, from => '127.0.0.2');

	is(status($r), $want, "$name: $want");

	if ($want == 429) {
		is(header($r, 'Retry-After'), '30', "$name: Retry-After 30");
	} else {
		is(body($r), PAGE, "$name: the page");
	}
}

# the throttle log: one line per 429, none for the 200s

my @lines = wait_log($t, qr/ refusal=facet facet=facet-/, scalar @refused);
is(scalar @lines, scalar @refused, 'one throttle log line per facet 429');
is(scalar(log_lines($t)), scalar @refused, 'no throttle log line for a 200');
is(scalar(grep { !/" 429 agent=/ } @lines), 0, 'every line is a 429');

my ($crawler) = grep { m!GET /glam/browse\?subjects=1&page=2&sf_culture=en&places=3 ! }
	@lines;
like($crawler, qr/ 429 agent="Googlebot" purpose=search verdict=verified action=allow refusal=facet facet=facet-crawler-params /,
	'crawler line: agent Googlebot, purpose, verdict');

my ($person) = grep { /referer="https:\/\/evil\.example\/\?heratio\.org"/ }
	@lines;
like($person, qr/ 429 agent="" purpose= verdict=none action=allow refusal=facet facet=facet-no-referer /,
	'browser line: no agent, verdict none, refusal facet');
like($person, qr/ua="\Q${\ BROWSER}\E"$/, 'browser line: the User-Agent');

###############################################################################
