#!/usr/bin/perl

# ngx_http_crawlward_module's facet guard (crawlward_facets, layer 2 of
# heratio.org's guide) on a parsed query string: a crawler with 4 or more
# parameters and 2 or more facets without a same-site Referer answer 429 with Retry-After;
# percent-encoding, +, repeated, empty and =-less parameters; Referer hosts
# compared exactly; verified crawlers exempt where configured; 10,000
# parameters, broken encoding and 8 KB values decided without a crash; the
# variables; dry run.

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
my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0';
my $BOT = 'Mozilla/5.0 (compatible; Rivetbot/1.0)';

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn limit_req/)
	->plan(32);

my $dir = render($t, 't/policies/budget.yaml');
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

    large_client_header_buffers 4 128k;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Facets "\$crawlward_params|\$crawlward_facets|\$crawlward_facet_rule" always;

        crawlward_facets names=subjects,places,place+name prefixes=filter_
                         crawler_max_params=4 max_facets_without_referer=2 same_site=example.org,www.example.org;

        location /browse {
            root $d/www;
            try_files /page.html =404;
        }

        location /exempt {
            crawlward_facets names=subjects,places crawler_max_params=4 max_facets_without_referer=2
                             same_site=example.org exempt_verified=on retry_after=7;
            root $d/www;
            try_files /page.html =404;
        }

        # the parameters' names before they followed the policy's
        location /legacy {
            crawlward_facets names=subjects,places max_params=2 max_facets=3;
            root $d/www;
            try_files /page.html =404;
        }

        location /watch {
            crawlward_dry_run on;
            root $d/www;
            try_files /page.html =404;
        }

        location /record {
            crawlward_facets off;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

sub f {
	my ($uri, %o) = @_;
	$o{ua} = $BROWSER unless exists $o{ua};
	my $r = get($uri, %o);
	return (status($r) // 'closed') . ' ' . (header($r, 'X-Facets') // '(none)');
}

# the crawler rule: 4 parameters or more
is(f('/browse?a=1&b=2&c=3&page=2', ua => $BOT), '429 4|0|facet-crawler-params',
	'a crawler with 4 parameters: 429');
my $r = get('/browse?a=1&b=2&c=3&page=2', ua => $BOT);
is(header($r, 'Retry-After'), '30', 'the 429 carries Retry-After: 30');
is(f('/browse?a=1&b=2&page=2', ua => $BOT), '200 3|0|', 'a crawler with 3 parameters: 200');
is(f('/browse?a=1&b=2&c=3&page=2'), '200 4|0|', 'a browser with 4 parameters: 200');

# the Referer rule: 2 facets or more without a same-site Referer
is(f('/browse?subjects=1&places=2'), '429 2|2|facet-no-referer', '2 facets, no Referer: 429');
is(f('/browse?subjects=1&places=2', referer => 'https://example.org/browse'),
	'200 2|2|', 'the site\'s Referer: 200');
is(f('/browse?subjects=1&places=2', referer => 'https://WWW.Example.org:443/x?y'),
	'200 2|2|', 'another same-site host, case and port: 200');
is(f('/browse?subjects=1&places=2', referer => 'https://evil.example/?example.org'),
	'429 2|2|facet-no-referer', 'the site named in another site\'s query: 429');
is(f('/browse?subjects=1&places=2', referer => 'https://example.org.evil.example/'),
	'429 2|2|facet-no-referer', 'the site as a prefix of another host: 429');
is(f('/browse?subjects=1&places=2', referer => 'https://example.org@evil.example/'),
	'429 2|2|facet-no-referer', 'the site as userinfo: 429');

# parsing
is(f('/browse?subjects=1&subjects=2&subjects=3'), '200 3|1|', 'a repeated facet is one facet');
is(f('/browse?subjects[]=1&places[]=2'), '429 2|2|facet-no-referer', 'PHP arrays');
is(f('/browse?%73ubjects=1&pl%61ces=2'), '429 2|2|facet-no-referer', 'percent-encoded names');
is(f('/browse?place+name=1&subjects=2'), '429 2|2|facet-no-referer', '+ is a space');
is(f('/browse?subjects&places'), '429 2|2|facet-no-referer', 'parameters without =');
is(f('/browse?&&subjects=1&&&'), '200 1|1|', 'empty parameters do not count');
is(f('/browse?filter_a=1&filter_b=2'), '429 2|2|facet-no-referer', 'prefixes');
is(f('/browse?Subjects=1&PLACES=2'), '200 2|0|', 'names are exact');

# verified crawlers: exempt where configured
is(f('/exempt?a=1&b=2&c=3&d=4', ua => $GOOGLEBOT, xff => '127.0.0.2'), '200 4|0|',
	'verified Googlebot, exempt_verified=on: 200');
is(f('/browse?a=1&b=2&c=3&d=4', ua => $GOOGLEBOT, xff => '127.0.0.2'),
	'429 4|0|facet-crawler-params', 'verified Googlebot elsewhere: 429');
$r = get('/exempt?subjects=1&places=2', ua => $BROWSER);
is(status($r) . ' ' . header($r, 'Retry-After'), '429 7', 'retry_after=7');

# hostile query strings: a decision, never a 500 or a crash
my $many = join '&', map { "p$_=x" } 1 .. 10_000;
is(f("/browse?$many"), '200 10000|0|', '10,000 parameters from a browser: counted, 200');
is(f("/browse?$many", ua => $BOT), '429 10000|0|facet-crawler-params',
	'10,000 parameters from a crawler: 429');
is(f('/browse?subjects=%zz&%&places=%%41%'), '429 3|2|facet-no-referer',
	'broken percent-encoding: decided');
is(f('/browse?subjects=' . ('x' x 8192) . '&places=' . ('%' x 8192)),
	'429 2|2|facet-no-referer', '8 KB values: decided');

# the names before crawler_max_params= and max_facets_without_referer=:
# still read, with a warning at start
is(f('/legacy?a=1&page=2', ua => $BOT), '429 2|0|facet-crawler-params',
	'max_params=2 still sets the crawler rule');
is(f('/legacy?subjects=1&places=2'), '200 2|2|', 'max_facets=3 still sets the Referer rule');
ok(wait_error_log($t, qr/\[warn\].*the "max_params=" parameter of the "crawlward_facets" directive is deprecated, use "crawler_max_params=" instead/),
	'the old name warns');

# off, and dry run
is(f('/record?subjects=1&places=2'), '200 ||', 'crawlward_facets off: not scanned');
is(f('/watch?subjects=1&places=2'), '200 2|2|facet-no-referer', 'dry run: named, not refused');
ok(wait_error_log($t, qr/dry run, would refuse with 429 \(facet-no-referer\): agent "-", verdict none, 2 parameters, 2 facets/),
	'dry run: logged');
ok(wait_error_log($t, qr/refused with 429 \(facet-crawler-params\): agent "Rivetbot"/),
	'a refusal is logged');

###############################################################################
