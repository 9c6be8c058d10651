#!/usr/bin/perl

# ngx_http_crawlward_module's proportional ladder in enforce mode, tried from
# the attacker's side: the session cookie (issued HttpOnly, SameSite=Lax,
# Secure; a forged, another site's or an expired one counts as none), a
# rotating address with one cookie, a new key every request from one
# network (the backstop), the rungs' answers (L2's bucket, a refusing
# challenge rung, L6's 403, a routed client's account-route limit),
# robots.txt at any rung, a verified crawler at any score, and a flood of
# new clients that fills the table, after which verified Googlebot and a
# signed-in user are untouched and nothing answers 500.

use warnings;
use strict;

use Test::More;

use Digest::SHA qw/ hmac_sha256 /;
use MIME::Base64 qw/ encode_base64url /;

use Test::Nginx qw/ :DEFAULT port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip proxy/)->plan(62);
$ENV{CRAWLWARD_BIN_Q} = quotemeta(crawlward_bin());

my $KEY = 'test-key-0123456789abcdef0123456789abcdef';
my $d = $t->testdir();
write_page($t);
$t->write_file('cookie.key', "# the first key signs\n$KEY\n");
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-ladder
  throttle_log: /var/log/nginx/ladder-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
robots: {}
module:
  status: /crawlward-status
classifier:
  mode: enforce
  window: 1m
  zone_size: 32k
  auth_paths: [/login]
  session_cookie: sess
  cookie:
    key_file: $d/cookie.key
    lifetime: 1h
  bucket: {burst: 5, rate: 1r/m}
  challenges: {L3: refuse, L4: refuse, L5: refuse}
  account_route: {burst: 3, rate: 1r/m}
  backstop: {burst: 40, rate: 1r/m}
EOF
my $dir = render($t, "$d/policy.yaml");

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

        crawlward_budget_signed_in \$remote_user;
        access_log $d/ladder.log crawlward_combined;
        add_header X-Rung \$crawlward_rung always;
        add_header X-Score \$crawlward_score always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }

        # pages a CDN may keep, as the application says in fields of the CDN's own
        location /cdn/ {
            proxy_pass http://127.0.0.1:%%PORT_8081%%/;
        }

        location /cdn-here/ {
            add_header CDN-Cache-Control "max-age=600";
            root $d/www;
            try_files /page.html =404;
        }

        # a page a shared cache may keep, as the site says
        location /public/ {
            add_header Cache-Control "public, max-age=600";
            root $d/www;
            try_files /page.html =404;
        }
    }

    # the application
    server {
        listen       127.0.0.1:%%PORT_8081%%;
        server_name  localhost;

        location / {
            add_header Cache-Control "public, max-age=600";
            add_header CDN-Cache-Control "max-age=600";
            add_header Cloudflare-CDN-Cache-Control "max-age=3600";
            add_header Surrogate-Control "max-age=600";
            return 200 "page";
        }
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

# a cookie value as the module signs one: version, client number, issue time, MAC
sub cookie_value {
	my ($key, $id, $issued) = @_;
	my $payload = pack('C Q< Q<', 1, $id, $issued);
	my $mac = substr(hmac_sha256($payload, $key), 0, 16);
	return encode_base64url($payload) . '.' . encode_base64url($mac);
}

# every Cache-Control line of an answer
sub cache_control {
	my ($r) = @_;
	my ($head) = ($r // '') =~ /^(.*?)\x0d?\x0a\x0d?\x0a/s or return ();
	return $head =~ /^Cache-Control:[ \t]*([^\x0d\x0a]*?)[ \t]*\x0d?$/mgi;
}

# every line of a response field, in order
sub fields {
	my ($r, $name) = @_;
	my ($head) = ($r // '') =~ /^(.*?)\x0d?\x0a\x0d?\x0a/s or return '';
	return join ' | ', $head =~ /^\Q$name\E:[ \t]*([^\x0d\x0a]*?)[ \t]*\x0d?$/mgi;
}

sub page {
	my ($path, %o) = @_;
	my @headers = @{ $o{headers} || [] };
	push @headers, "Cookie: $o{cookie}" if defined $o{cookie};
	return get($path, ua => $o{ua} // $CHROME, xff => $o{from},
		headers => \@headers);
}

# --- the cookie

my $r = page('/a', from => '10.1.1.1');
like(header($r, 'Set-Cookie'),
	qr/^__Host-crawlward=[\w-]+\.[\w-]+; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax; Secure$/,
	'a new client gets the session cookie');
my ($issued) = header($r, 'Set-Cookie') =~ /^__Host-crawlward=([^;]+)/;
is(join(', ', cache_control($r)), 'private', 'the answer that sets it: Cache-Control private, so no shared cache gives it out');
$r = page('/b', from => '10.1.1.1', cookie => "__Host-crawlward=$issued");
is(header($r, 'Set-Cookie'), undef, 'a valid cookie: none issued');
is(join(', ', cache_control($r)), '', 'and no Cache-Control of the module\'s');
$r = page('/public/x', from => '10.1.1.5');
is(join(', ', sort(cache_control($r))) . (defined header($r, 'Set-Cookie') ? ' cookie' : ''), 'private, public, max-age=600 cookie',
	'a page the site marks public, with the cookie: private beside it');

# a CDN told by a field of its own to keep the page: each such field says private too
# (no-store to a surrogate), the application's and one add_header writes after the module
$r = page('/cdn/x', from => '10.1.1.7');
like(header($r, 'Set-Cookie'), qr/^__Host-crawlward=/, 'behind a CDN: the cookie');
is(fields($r, 'CDN-Cache-Control'), 'max-age=600 | private', 'CDN-Cache-Control: private beside the application\'s');
is(fields($r, 'Cloudflare-CDN-Cache-Control'), 'max-age=3600 | private', 'a CDN\'s own: private beside the application\'s');
is(fields($r, 'Surrogate-Control'), 'max-age=600 | no-store', 'Surrogate-Control: no-store beside the application\'s');
$r = page('/cdn-here/x', from => '10.1.1.8');
is(fields($r, 'CDN-Cache-Control'), 'private | max-age=600', 'one add_header writes after the module: combined with private');
$r = page('/cdn/y', from => '10.1.1.7', cookie => "__Host-crawlward=$issued");
is(fields($r, 'CDN-Cache-Control') . '; ' . fields($r, 'Surrogate-Control') . '; ' . (header($r, 'Set-Cookie') // 'no cookie'),
	'max-age=600; max-age=600; no cookie', 'a returning client: the application\'s fields alone');

(my $tampered = $issued) =~ s/^(.)/$1 eq 'A' ? 'B' : 'A'/e;
$r = page('/c', from => '10.1.1.2', cookie => "__Host-crawlward=$tampered");
like(header($r, 'Set-Cookie'), qr/^__Host-crawlward=/, 'a forged cookie counts as none');
$r = page('/c', from => '10.1.1.3', cookie => '__Host-crawlward='
	. cookie_value('another-site-0123456789abcdef0123456789', 7, time()));
like(header($r, 'Set-Cookie'), qr/^__Host-crawlward=/, 'another site\'s cookie counts as none');
$r = page('/c', from => '10.1.1.4',
	cookie => '__Host-crawlward=' . cookie_value($KEY, 7, time() - 7200));
like(header($r, 'Set-Cookie'), qr/^__Host-crawlward=/, 'an expired cookie counts as none');
$r = page('/c', from => '10.1.1.1',
	cookie => '__Host-crawlward=' . cookie_value($KEY, 7, time()));
is(header($r, 'Set-Cookie'), undef, 'a cookie this site signed is kept');
# a sibling host (user pages on a subdomain) can set a cookie for the whole domain,
# but none named __Host-: a value this site signed, under the name without it, is no cookie
$r = page('/c', from => '10.1.1.6',
	cookie => 'crawlward=' . cookie_value($KEY, 8, time()));
like(header($r, 'Set-Cookie'), qr/^__Host-crawlward=/, 'the cookie without __Host-, as a sibling host could set it, counts as none');

# a client that keeps no cookie is offered one on its 1st, 2nd, 4th, 8th... request
my @offered = map { defined header(page('/d', from => '10.1.1.9'), 'Set-Cookie') ? 1 : 0 } 1 .. 9;
is(join('', @offered), '110100010', 'a client without a cookie: offered one on requests 1, 2, 4 and 8');

# a client refused on an address and browser that others may share is
# offered the cookie on the refusal, and with it comes back as a client of
# its own; the shared client stays refused
my @shared = map { page("/shared/$_", from => '10.7.1.1') } 1 .. 8;
my ($refused) = grep { status($_) eq '429' } @shared;
ok($refused, 'a shared address and browser: refused by L2\'s bucket');
my ($offer) = (header($refused // '', 'Set-Cookie') // '') =~ /^__Host-crawlward=([^;]+)/;
ok($offer, 'the refusal offers the cookie');
is(status(page('/shared/back', from => '10.7.1.1', cookie => "__Host-crawlward=$offer")), 200,
	'with it, a client of its own: 200');
is(status(page('/shared/again', from => '10.7.1.1')), 429, 'without it, the shared client is still refused');

# --- a rotating address with one cookie: one client, whose requests add up

my $one = '__Host-crawlward=' . cookie_value($KEY, 1001, time());
my @statuses = map { status(page("/rotate/$_", from => "10.2.$_.1", cookie => $one)) }
	1 .. 30;
my $first = (grep { $statuses[$_] eq '429' } 0 .. $#statuses)[0];
ok(defined $first && $first <= 10, 'one cookie from 30 addresses: refused from request '
	. (defined $first ? $first + 1 : 'none'));
$r = page('/rotate/x', from => '10.2.99.1', cookie => $one);
is(status($r), 429, 'one cookie: still refused from a new address');
ok(defined header($r, 'Retry-After'), 'one cookie: Retry-After');
like(header($r, 'X-Rung'), qr/^L[2-6]\z/, 'one cookie: on a limiting rung ('
	. (header($r, 'X-Rung') // '') . ')');
is(status(page('/fresh', from => '10.2.200.1')), 200, 'a new client elsewhere: 200');

# --- a client kept refused takes nothing from its network's backstop: its
# neighbours on the /24 still get through

my $greedy = '__Host-crawlward=' . cookie_value($KEY, 1009, time());
my @greedy = map { my $g = page("/greedy/$_", from => '10.9.9.1', cookie => $greedy);
	[status($g), header($g, 'X-Rung') // ''] } 1 .. 50;
# each request as its rung says: L1 passes, L2 passes its bucket's burst of 5,
# a challenge rung refuses; a handful of distinct paths may count as fewer in
# the window's sketch (by the zone's random hash seed, about 1 run in 250), so
# the rung can rise a request or two later, never higher than it should
my ($on_l2, @against) = (0);
for my $i (0 .. $#greedy) {
	my ($code, $rung) = @{ $greedy[$i] };
	my $expected = $rung eq 'L1' ? 200 : $rung eq 'L2' ? (++$on_l2 <= 5 ? 200 : 429)
		: $rung =~ /^L[345]\z/ ? 429 : 'L1 to L5';
	push @against, ($i + 1) . ": $code at $rung" if $code ne $expected;
}
is(join(', ', @against), '', 'one client hammering from 10.9.9.0/24: each request as its rung answers');
cmp_ok(scalar(grep { $_->[0] ne '200' } @greedy), '>=', 42,
	'and refused after its burst and at most three requests of the window\'s error ('
	. join(' ', map { $_->[1] } @greedy[0 .. 9]) . ' ...)');
is(status(page('/neighbour', from => '10.9.9.2', ua => "$CHROME neighbour")), 200,
	'a neighbour on the same /24: 200 (the refused requests took nothing from the backstop)');

# --- a new key every request from one network: the backstop holds it

my $made = module_status('/crawlward-status')->{ladder}{made};
my @rotating = map {
	status(page("/net/$_", from => "127.0.0." . (10 + $_), ua => "$CHROME r$_",
		cookie => "__Host-crawlward=junk$_"))
} 1 .. 60;
is(scalar(grep { $_ eq '200' } @rotating[0 .. 39]), 40, 'a new client each request: 40 answered (the burst)');
is(scalar(grep { $_ eq '429' } @rotating[40 .. 59]), 20, 'then the network\'s backstop: 429');
is(module_status('/crawlward-status')->{ladder}{made} - $made, 41,
	'the backstop\'s 20 refusals made no client (40 clients and the network\'s bucket)');
$r = page('/net/googlebot', from => '127.0.0.2', ua => $GOOGLEBOT);
is(status($r), 200, 'verified Googlebot in the same network: 200');
is(header($r, 'X-Rung'), 'L0', 'verified Googlebot: L0');

# --- L6: 403; robots.txt answers 200 at any rung

my $six = '__Host-crawlward=' . cookie_value($KEY, 1006, time()) . '; sess=s1';
my @families = ($CHROME, 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0',
	'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15',
	'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36');
for my $i (1 .. 40) {
	$r = page("/six/$i", from => '10.5.' . ($i % 2 + 1) . '.1', ua => $families[$i % 4],
		cookie => $six);
}
is(status($r), 403, 'a client past L6\'s ceiling: 403');
is(header($r, 'X-Rung'), 'L6', 'L6');
ok(wait_error_log($t, qr/crawlward: refused with 403 \(ladder L6\): score 0\.\d\d, rate=/),
	'L6: the refusal logged with its contributions');
$r = page('/robots.txt', from => '10.5.1.1', ua => $CHROME, cookie => $six);
is(status($r), 200, 'robots.txt at a high rung: 200');
like(header($r, 'X-Rung'), qr/^L[56]\z/, 'robots.txt: asked at ' . (header($r, 'X-Rung') // ''));

# crawlward explain --client: the same client, from the status endpoint
my $six_value = cookie_value($KEY, 1006, time());
my $explained = `$ENV{CRAWLWARD_BIN_Q} explain $d/policy.yaml --client http://127.0.0.1:@{[ port(8080) ]}/crawlward-status --cookie $six_value 2>&1`;
like($explained, qr/score 0\.\d\d: L[56]\n  \(the module says the same\)/, 'explain --client: the live client, scored as the module scores it');
# and the cookie as the browser holds it, name and value
$explained = `$ENV{CRAWLWARD_BIN_Q} explain $d/policy.yaml --client http://127.0.0.1:@{[ port(8080) ]}/crawlward-status --cookie __Host-crawlward=$six_value 2>&1`;
like($explained, qr/score 0\.\d\d: L[56]\n  \(the module says the same\)/, 'explain --client --cookie __Host-crawlward=VALUE: the same client');

# the access log carries the rung, the score and each contribution
wait_file_lines("$d/ladder.log", 1);
my @logged = file_lines("$d/ladder.log");
ok((grep { m!"GET /six/40 HTTP/1\.0" 403 .* refusal=ladder .* rung=L6 score=[01]\.\d\d contributions=(?:[a-z-]+=0\.\d\d,)*ua-spread=0\.[1-9]\d(?:,[a-z-]+=0\.\d\d)*$! } @logged),
	'crawlward_combined: rung, score and contributions logged');

# novelty counts URLs, the query with the path (as crawlward analyze does): a client
# paging through one list shows each page as new, one that asks the same URL again does not
page("/list?page=$_", from => '10.7.3.1') for 1 .. 6;
page('/list?page=1', from => '10.7.2.1') for 1 .. 6;
wait_file_lines("$d/ladder.log", scalar(@logged) + 12);
@logged = file_lines("$d/ladder.log");
my ($paging) = grep { m!^10\.7\.3\.1 .*"GET /list\?page=6 ! } @logged;
like($paging // '', qr/ contributions=(?:[a-z-]+=0\.\d\d,)*novelty=0\.22(?:,|$)/, 'novelty: six pages of one list are six URLs')
	or diag($paging // 'no line');
my ($again) = grep { m!^10\.7\.2\.1 ! } reverse @logged;
ok(($again // '') =~ / contributions=(\S*)$/ && $1 !~ /novelty=0\.(?!00)/, 'novelty: one URL asked six times is one')
	or diag($again // 'no line');

# --- a verified crawler at any score: L0

my @googlebot = map { page("/g/$_", from => '127.0.0.2', ua => $GOOGLEBOT) } 1 .. 60;
is(scalar(grep { status($_) eq '200' } @googlebot), 60, 'verified Googlebot, 60 pages in a minute: all 200');
is(scalar(grep { (header($_, 'X-Rung') // '') eq 'L0' } @googlebot), 60, 'verified Googlebot: all L0');

# --- a routed client: the account route's limit

my $stuffer = '__Host-crawlward=' . cookie_value($KEY, 1007, time());
my @login = map { page('/login', from => "10.6.1.$_", cookie => $stuffer) } 1 .. 6;
is(header($login[-1], 'X-Rung'), 'routed', 'authentication-shaped: routed');
is(join(' ', map { status($_) } @login), '200 200 200 429 429 429',
	'routed: the account route\'s burst of 3, then 429');

# a flood of new clients at the sign-in page of that network, which its account
# route refuses: each new client pays a token of the backstop for its entry, so the
# flood makes no more clients than the backstop holds
my $made_before = module_status('/crawlward-status')->{ladder}{made};
my @stuffing = map { status(page('/login', from => "10.6.1.$_", ua => "$CHROME s$_")) } 1 .. 60;
is(scalar(grep { $_ eq '429' } @stuffing), 60, 'a flood of new clients at the sign-in page: all 429');
cmp_ok(module_status('/crawlward-status')->{ladder}{made} - $made_before, '<=', 40,
	'the flood made no more clients than the backstop\'s burst of 40');

# --- the status

my $st = module_status('/crawlward-status');
my %rung = map { $_->{rung} => $_ } @{ $st->{ladder}{rungs} || [] };
ok(($rung{L6}{refused} // 0) >= 1, 'status: L6 refusals counted');
ok(($rung{routed}{refused} // 0) >= 3, 'status: routed refusals counted');
is($st->{ladder}{mode}, 'enforce', 'status: enforce mode');
ok($st->{ladder}{untracked_requests} >= 61, 'status: verified requests untracked');
my $prom = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
like($prom, qr/^crawlward_ladder_refused_total\{zone="crawlward_ladder",rung="L6"\} [1-9]\d*$/m,
	'Prometheus: L6 refusals');
my %typed = map { $_ => 1 } $prom =~ /^# TYPE (crawlward_ladder_\w+) /mg;
my @untyped = grep { !$typed{$_} } $prom =~ /^(crawlward_ladder_\w+)\{/mg;
is("@untyped", '', 'Prometheus: every ladder sample has its TYPE');

# --- a flood of new clients fills the table

my $capacity = $st->{ladder}{capacity};
my @flood = map { status(page("/flood/$_", from => "10.9.$_.1")) } 1 .. 3 * $capacity;
is(scalar(grep { $_ ne '200' && $_ ne '429' } @flood), 0, 'a flood of new clients: no other answer than 200 or 429');
$st = module_status('/crawlward-status');
ok($st->{ladder}{evictions} > 0, 'the flood filled the table (evictions ' . $st->{ladder}{evictions} . ')');
is($st->{ladder}{clients}, $capacity, 'the table holds its capacity, no more');
$r = page('/after-flood', from => '127.0.0.2', ua => $GOOGLEBOT);
is(status($r) . ' ' . header($r, 'X-Rung'), '200 L0', 'after the flood: verified Googlebot 200, L0');
$r = page('/after-flood', from => '10.9.250.1', headers => ['Authorization: Basic dXNlcjpwYXNz']);
is(status($r) . ' ' . header($r, 'X-Rung'), '200 L0', 'after the flood: a signed-in user 200, L0');
is(scalar(grep { /\[(alert|emerg|crit)\]/ } error_log_lines($t)), 0, 'no alert in the error log');

###############################################################################
