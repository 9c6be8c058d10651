#!/usr/bin/perl

# Key directories taken from traffic (module.signatures.fetch_seen): the
# module counts the directories that signed requests here without the key
# file holding their keys; `crawlward update-ranges` reads that count from
# the status endpoint and takes the busiest with enough requests, up to its
# bound, then fetches them by the same rules as the named ones. Their
# signatures then verify and name no agent. From the attacker's side: a
# directory with too few requests is not taken, nor one past the bound, and
# a status endpoint that does not answer keeps what was taken before.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http ssl/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(19);

my $d = $t->testdir();
write_page($t);

my ($SEEN, $THIRD, $FEW, $NAMED, $HTTP) = (port(8443), port(8444), port(8445), port(8447), port(8080));

sub policy {
	my ($status) = @_;
	return <<"EOF";
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-directories-seen
  throttle_log: /var/log/nginx/directories-seen-throttled.log
catalogue:
  builtin: false
  agents:
    - name: Example-Agent
      operator: Example
      purpose: ai-user
      robots_only: true
      signature_agent: https://localhost:$NAMED
robots: {}
module:
  status: /crawlward-status
  signatures:
    hosts: [localhost]
    required: [/agents/]
    fetch_seen:
      status: $status
      max: 1
      min_requests: 3
EOF
}
$t->write_file('policy.yaml', policy("http://127.0.0.1:$HTTP/crawlward-status"));
my $dir = render($t, "$d/policy.yaml");

test_ca($d, '127.0.0.1');

my $WELL_KNOWN = '.well-known/http-message-signatures-directory';
for my $name (qw/ seen third few named /) {
	new_key("$d/$name.pem");
	mkdir("$d/$name");
	mkdir("$d/$name/.well-known");
	$t->write_file("$name/$WELL_KNOWN", '{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": "'
		. public_x("$d/$name.pem") . '"}]}');
}

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    ssl_certificate $d/server.pem;
    ssl_certificate_key $d/server.key;

    server {
        listen       127.0.0.1:$HTTP;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        add_header X-Signature \$crawlward_signature always;
        add_header X-Signer \$crawlward_signature_agent always;
        add_header X-Verdict \$crawlward_verdict always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }

    server { listen 127.0.0.1:$SEEN ssl; server_name localhost; root $d/seen; }
    server { listen 127.0.0.1:$THIRD ssl; server_name localhost; root $d/third; }
    server { listen 127.0.0.1:$FEW ssl; server_name localhost; root $d/few; }
    server { listen 127.0.0.1:$NAMED ssl; server_name localhost; root $d/named; }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

# a request for PATH (/page) signed with NAME's key for its directory at PORT: what the module made of it
sub signed {
	my ($name, $port, $path) = @_;
	my $r = get($path // '/page', ua => $CHROME, headers => [ signed_headers($d, key => "$d/$name.pem",
		keyid => 'k1', agent => "https://localhost:$port") ]);
	return join(' ', (map { header($r, $_) // '-' } qw/ X-Signature X-Signer X-Verdict /), status($r));
}

sub update {
	local $ENV{CRAWLWARD_TEST_DIRECTORY_ADDRESSES} = '127.0.0.1';
	my ($status, $out) = run_bounded(60, crawlward_bin(), 'update-ranges', "$d/policy.yaml",
		'--out', $dir, '--root', $d, '--ranges-dir', "$d/ranges", '--ca-file', "$d/ca.pem",
		'--timeout', 5, '--no-reload');
	return ($status >> 8, $out);
}

sub key_file { return join('', file_lines("$dir/crawlward-signature-keys.json")); }

is(signed('seen', $SEEN), "unverified https://localhost:$SEEN none 200", 'an unknown directory: unverified');
signed('seen', $SEEN) for 1 .. 4;
signed('third', $THIRD) for 1 .. 4;
signed('few', $FEW) for 1 .. 2;
my $st = module_status('/crawlward-status');
is_deeply({ map { $_->{directory} => $_->{requests} } @{ $st->{signatures}{unknown_directories}{busiest} } },
	{ "https://localhost:$SEEN" => 5, "https://localhost:$THIRD" => 4, "https://localhost:$FEW" => 2 },
	'status: the unknown directories counted');

my ($status, $out) = update();
is($status, 0, 'update-ranges: exit status 0') or diag($out);
like($out, qr!^seen      directory https://localhost:$SEEN: 5 requests signed here, taken from traffic \(1 of at most 1\)$!m,
	'the busiest unknown directory taken');
like($out, qr!^left out  directory https://localhost:$THIRD: 4 requests signed here; the 1 taken from traffic are all fetch_seen\.max allows$!m,
	'the next one left out: the bound');
unlike($out, qr!localhost:$FEW!, 'one with fewer requests than min_requests: not taken, not fetched');
like($out, qr!^changed   directory https://localhost:$SEEN: 1 key \(was none\)$!m, 'the taken directory fetched');
like(key_file(), qr!"https://localhost:$SEEN"!, 'the key file holds its key');
unlike(key_file(), qr!localhost:(?:$THIRD|$FEW)!, 'and not the others\'');
like(join("\n", file_lines("$dir/crawlward-http.conf")),
	qr!^# Taken from traffic \(module\.signatures\.fetch_seen\), their signatures verify and name no agent: https://localhost:$SEEN\.$!m,
	'the rendered configuration says which');

ok(reload_workers($t), 'nginx reloaded');
is(signed('seen', $SEEN), "verified https://localhost:$SEEN none 200", 'its signatures verify, and name no agent');
is(signed('seen', $SEEN, '/agents/search'), "verified https://localhost:$SEEN none 403",
	'a path for signed agents: a directory anyone can make opens nothing (403)');
is(signed('named', $NAMED, '/agents/search'), "verified https://localhost:$NAMED verified 200",
	'the named agent\'s directory opens it');
is(signed('third', $THIRD), "unverified https://localhost:$THIRD none 200", 'the one left out: unverified');

($status, $out) = update();
like($out, qr!^unchanged directory https://localhost:$SEEN: 1 key$!m, 'the next run fetches it again');
unlike($out, qr!^seen !m, 'and takes nothing new');

# the status endpoint does not answer: what was taken stays
$t->write_file('policy.yaml', policy('http://127.0.0.1:' . port(8446) . '/crawlward-status'));
($status, $out) = update();
like($out, qr!^failed    status http://127\.0\.0\.1:\d+/crawlward-status: .*; the directories taken from traffic before are kept$!m,
	'a status endpoint that does not answer') or diag($out);
like($out, qr!^unchanged directory https://localhost:$SEEN: 1 key$!m, 'and the directory taken before is still fetched');

###############################################################################
