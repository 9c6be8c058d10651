#!/usr/bin/perl

# crawlward explain against nginx with the module, on thousands of random
# requests: addresses inside and outside the published ranges (IPv4 and
# IPv6, through realip), catalogue agents, spoofed claims and mere mentions,
# browsers, empty and odd User-Agents, machine doors, browse pages,
# robots.txt and the sitemap, percent-encoded, dot-segment and double-slash
# paths, facet and PHP-name tricks in queries, same-site, other and
# look-alike Referers. Every request is put to `crawlward explain
# --requests` and to nginx; the test fails on any difference of status,
# rule, agent or verdict. The stateful limits are raised so that none
# decides here.
#
# A run draws its requests from a seed that changes every run and is
# printed; CRAWLWARD_DIFF_SEED=<seed> replays one, CRAWLWARD_DIFF_REQUESTS
# sets how many (default 5000).

use warnings;
use strict;

use Test::More;
use JSON::PP;

use Test::Nginx qw/ http /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req limit_conn/)
	->plan(4);

my $POLICY = 't/policies/differential.yaml';
my $dir = render($t, $POLICY);
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

        # what the module decided, on every answer it gives (444 gives
        # none), a header each: an agent's token may hold any printable byte
        add_header X-Refusal "\$crawlward_refusal" always;
        add_header X-Facet "\$crawlward_facet_rule" always;
        add_header X-Agent "\$crawlward_agent" always;
        add_header X-Verdict "\$crawlward_verdict" always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################
# the requests

my $seed = $ENV{CRAWLWARD_DIFF_SEED} // (time() ^ ($$ << 8)) % 2**31;
my $count = $ENV{CRAWLWARD_DIFF_REQUESTS} // 5000;
diag("differential: $count requests from seed $seed "
	. "(CRAWLWARD_DIFF_SEED=$seed replays them)");
srand($seed);

sub pick { return $_[int(rand(@_))]; }
sub chance { return rand() < $_[0]; }

# Googlebot and bingbot are published in these networks; every operator of
# the test range files at 127.0.0.2
my @ADDRESSES = (
	sub { '127.0.0.2' },
	sub { '192.0.2.' . int(rand(256)) },
	sub { '198.51.100.' . int(rand(256)) },
	sub { sprintf('2001:db8:1::%x', int(rand(65536))) },
	sub { sprintf('2001:db8:2:%x::%x', int(rand(65536)), int(rand(65536))) },
	sub { join('.', 203, 0, 113, int(rand(256))) },
	sub { join('.', 1 + int(rand(223)), map { int(rand(256)) } 1 .. 3) },
	sub { sprintf('2001:db8:%x:%x::%x', 3 + int(rand(60000)),
		int(rand(65536)), int(rand(65536))) },
	sub { '::ffff:192.0.2.' . int(rand(256)) },
);

my @CRAWLERS = (
	'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
	'Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.204 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
	'Googlebot-Image/1.0',
	'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)',
	'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)',
	'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)',
	'Mozilla/5.0 (compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot)',
	'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot',
	'CCBot/2.0 (https://commoncrawl.org/faq/)',
	'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)',
	'Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)',
	'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)',
	'DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)',
	'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)',
	'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)',
	'Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)',
	'python-requests/2.31.0',
	'curl/8.5.0',
	'Wget/1.21.4',
	'Go-http-client/2.0',
	'Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)',
	'Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)',
	'Mozilla/5.0 (compatible; Bytespider; spider-feedback@bytedance.com)',
	'Miniflux/2.1.0 (https://miniflux.app; 3 subscribers)',
	'Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)',
	'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36',
	'Mozilla/5.0 zgrab/0.x',
	'Mozilla/5.0 (compatible; Rivetbot/1.0; +https://example.net/bot)',
	'Zorkfetch/0.3 (+mailto:ops@example.com)',
);

# readers and others that mention a crawler without claiming to be one
my @MENTIONS = (
	'Feedly/1.0 (+http://www.feedly.com/fetcher.html; like FeedFetcher-Google)',
	'FreshRSS/1.24.0 (Linux; https://freshrss.org) like Googlebot',
	'Mozilla/5.0 (compatible; SentiBot www.sentibot.eu (compatible with Googlebot))',
	'Fake-Googlebot/1.0',
	'Mozilla/5.0 (treat like Googlebot)',
);

my @BROWSERS = (
	BROWSER,
	'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0',
	'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
	'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1',
	'Mozilla/5.0 (Linux; Android 14; Cubot KingKong 9) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36',
	'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0',
);

my @PRINTABLE = map { chr } 0x20 .. 0x7e;

sub odd_ua {
	return pick(
		sub { join('', map { pick(@PRINTABLE) } 1 .. 1 + int(rand(40))) },
		sub { 'x' x (200 + int(rand(3000))) },
		sub { 'Mozilla/5.0 (compatible; ' . pick(qw/Googlebot bingbot GPTBot/) },
		sub { pick(qw/bot crawler spider Bot\/1.0 -/) },
		sub { 'Mozilla/5.0 (compatible; ' . join('', map { pick('a' .. 'z') } 1 .. 6)
			. pick('bot', 'Crawler', '-spider', 'Fetcher') . '/1.' . int(rand(9)) . ')' },
		sub { my $u = pick(@CRAWLERS, @BROWSERS);
			substr($u, int(rand(length $u)), 0, pick(@PRINTABLE)); $u },
		sub { ' ' . pick(@CRAWLERS) . ' ' x int(rand(3)) },
		sub { ' ' x (1 + int(rand(3))) },
		sub { lc pick(@CRAWLERS) },
	)->();
}

sub user_agent {
	my $r = rand();
	return pick(@CRAWLERS) if $r < 0.40;
	return pick(@BROWSERS) if $r < 0.62;
	return pick(@MENTIONS) if $r < 0.70;
	return '' if $r < 0.74;
	return undef if $r < 0.78;
	return odd_ua();
}

my @FACETS = qw/ subjects places genres levels names creators repos
	collection mediatypes languages occupations entityType /;

sub encode_some {
	my ($s) = @_;
	return join('', map {
		chance(0.15) ? sprintf(pick('%%%02X', '%%%02x'), ord) : $_
	} split //, $s);
}

sub facet_name {
	my $f = pick(@FACETS);
	return pick(
		$f, $f, $f, "$f\[\]", "$f\[0\]", encode_some($f), "+$f", "%20$f",
		"$f%00x", "$f\[", uc $f, "${f}x", "x$f",
	);
}

sub query {
	my @p;
	for (1 .. int(rand(7))) {
		push @p, pick(
			sub { facet_name() . '=' . int(rand(100)) },
			sub { facet_name() },
			sub { pick(qw/page sort view limit q/) . '=' . int(rand(9)) },
			sub { '' },
			sub { encode_some(facet_name()) . '=x%26y' },
		)->();
	}
	return join(pick('&', '&', '&&'), @p);
}

my @PATHS = qw{
	/ /robots.txt /sitemap.xml /sitemap/1.xml /api/v1/records /api/v1/
	/api/v2/items /oai /resourcesync /.well-known/resourcesync
	/glam/browse /actor/browse /glam/browsex /search /glam/search
	/record/abc-123 /css/site.css /admin /login /index.php /robots.txtx
};

sub mangle_path {
	my ($p) = @_;
	my $r = rand();
	return $p if $r < 0.45;
	return '/' . encode_some(substr($p, 1)) if $r < 0.60;
	return pick('/', '//', '/./', '/x/../', '/%2e/', '/a/%2E%2E/')
		. substr($p, 1) if $r < 0.72;
	return $p . pick('/', '/.', '/..', '//', '%2F', '/x/..') if $r < 0.82;
	return join('/', map { chance(0.3) ? "$_/." : $_ } split m!/!, $p)
		. (chance(0.5) ? '' : '/') if $r < 0.88;
	# what nginx itself refuses: an encoded NUL, bad escapes, above the root
	return pick("$p%00", "/..$p", "/%2e%2e$p", "$p%zz", "$p%4", "$p%",
		"$p/../../..");
}

sub target {
	my $p = mangle_path(pick(@PATHS));
	my $q = '';
	if ($p =~ m!browse! || chance(0.15)) {
		$q = query();
	}
	return length $q || chance(0.1) ? "$p?$q" : $p;
}

my @REFERERS = (
	'https://heratio.org/glam/browse', 'http://www.heratio.org/',
	'https://HERATIO.org/x', 'https://heratio.org:443/glam/browse?x=1',
	'https://evil.example/?heratio.org', 'https://heratio.org.evil.example/',
	'https://user@heratio.org/', 'https://evil.example/heratio.org',
	'heratio.org', 'https://www.google.com/', '',
);

my @requests;
for my $n (1 .. $count) {
	my %r = (
		id => $n,
		method => chance(0.9) ? 'GET' : 'HEAD',
		url => target(),
		ip => pick(@ADDRESSES)->(),
		ua => user_agent(),
	);
	$r{referer} = pick(@REFERERS) if chance(0.5);
	push @requests, \%r;
}

###############################################################################
# what explain says

my $json = JSON::PP->new->canonical;
my $file = "$d/requests.jsonl";
open my $fh, '>', $file or die "can't write $file: $!\n";
for my $r (@requests) {
	my %line = (url => $r->{url}, ip => $r->{ip}, method => $r->{method});
	$line{ua} = $r->{ua} if defined $r->{ua};
	$line{referer} = $r->{referer} if defined $r->{referer};
	print $fh $json->encode(\%line), "\n";
}
close $fh;

my ($status, $out) = run_bounded(120, crawlward_bin(), 'explain',
	repo_root() . "/$POLICY", '--ranges-dir', repo_root() . '/t/ranges',
	'--requests', $file);
is($status, 0, 'crawlward explain --requests ran') or diag($out);
my @explained = map { $json->decode($_) } grep { /^\{/ } split /\n/, $out;
is(scalar @explained, $count, "explain answered each of the $count requests");

###############################################################################
# what nginx does, and the differences

sub send_request {
	my ($r) = @_;
	my $req = "$r->{method} $r->{url} HTTP/1.0\x0d\x0aHost: localhost\x0d\x0a"
		. "X-Forwarded-For: $r->{ip}\x0d\x0a";
	$req .= "User-Agent: $r->{ua}\x0d\x0a" if defined $r->{ua};
	$req .= "Referer: $r->{referer}\x0d\x0a" if defined $r->{referer};
	return http("$req\x0d\x0a");
}

my (@decided, @identified);
for my $i (0 .. $#requests) {
	my $r = $requests[$i];
	my $e = $explained[$i] or last;
	my $reply = send_request($r) // '';

	my $got = status($reply) // ($reply eq '' ? 444 : 'garbage');
	my ($refusal, $facet, $agent, $verdict) =
		map { my $v = header($reply, $_) // ''; $v eq '' ? '-' : $v }
		qw/ X-Refusal X-Facet X-Agent X-Verdict /;

	# explain's rule as nginx names what refused it
	my $want = $e->{status} // 200;
	my $rule = $e->{rule};
	my %refusal_of = ('bot-blocker' => 'bot-blocker',
		'facet-crawler-params' => 'facet', 'facet-no-referer' => 'facet');
	my $want_refusal = $refusal_of{$rule} // '-';
	my $want_facet = $rule =~ /^facet-/ ? $rule : '-';
	# a 444 closes the connection: nothing to read but the status
	my $decided = $got == 444
		? "$got"
		: "$got $refusal $facet";
	my $expected = $want == 444
		? "$want"
		: "$want $want_refusal $want_facet";

	my $what = "$r->{method} $r->{url} from $r->{ip}, User-Agent "
		. (defined $r->{ua} ? "\"$r->{ua}\"" : 'none')
		. (defined $r->{referer} ? ", Referer \"$r->{referer}\"" : '');
	if ($decided ne $expected) {
		push @decided, "$what: nginx $decided, explain $expected:\n    "
			. join("\n    ", @{ $e->{steps} });
	}
	next if $got == 444 || $got == 400;

	# who the module took the client for
	my $want_agent = $e->{agent} // '-';
	my $want_verdict = $e->{verdict};
	if ("$agent $verdict" ne "$want_agent $want_verdict") {
		push @identified, "$what: nginx $agent $verdict, "
			. "explain $want_agent $want_verdict";
	}
}

my $shown = 15;
is(scalar @decided, 0, "status and rule as explain says, on $count requests "
	. "(seed $seed)")
	or diag(join("\n", splice(@decided, 0, $shown)));
is(scalar @identified, 0, "agent and verdict as explain says (seed $seed)")
	or diag(join("\n", splice(@identified, 0, $shown)));

###############################################################################
