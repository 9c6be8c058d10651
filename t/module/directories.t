#!/usr/bin/perl

# Web Bot Auth key directories, end to end: `crawlward update-ranges`
# fetches each directory the policy trusts from its origin over HTTPS (this
# test's nginx, with a certificate from the test's own CA), keeps what it
# fetched, and renders the key file the module loads; a request signed with
# the directory's key is then its agent, verified. From the attacker's side:
# a directory that redirects, one larger than 64 KiB, one at a private
# address, a certificate the fetcher does not trust, and a fetch that fails
# after a good one, which keeps the last good keys.

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
$t->plan(21);

my $d = $t->testdir();
write_page($t);

my ($GOOD, $MOVED, $BIG, $PRIVATE) = (port(8443), port(8444), port(8445), port(8446));

$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-directories
  throttle_log: /var/log/nginx/directories-throttled.log
catalogue:
  builtin: false
  agents:
    - name: Example-Agent
      operator: Example
      purpose: ai-user
      robots_only: true
      signature_agent: https://localhost:$GOOD
robots: {}
module:
  status: /crawlward-status
  signatures:
    directories:
      - https://localhost:$MOVED
      - https://localhost:$BIG
      - https://127.0.0.2:$PRIVATE
    hosts: [localhost]
EOF
my $dir = render($t, "$d/policy.yaml");

# the agent's signing key, and a CA of this test's own with the servers' certificate
new_key("$d/agent.pem");
test_ca($d, '127.0.0.1', '127.0.0.2');

my $X = public_x("$d/agent.pem");
my $DIRECTORY = qq({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "agent-key-1", "x": "$X"}]});
my $WELL_KNOWN = '.well-known/http-message-signatures-directory';
mkdir("$d/$_") and mkdir("$d/$_/.well-known") for qw/ good big /;
$t->write_file("good/$WELL_KNOWN", $DIRECTORY);
# a directory padded past 64 KiB
$t->write_file("big/$WELL_KNOWN", '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "'
	. $X . '"}], "padding": "' . ('x' x 70000) . '"}');

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
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        # what the module decides, without refusing
        crawlward_dry_run on;
        add_header X-Signature \$crawlward_signature always;
        add_header X-Agent \$crawlward_agent always;
        add_header X-Verdict \$crawlward_verdict always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }

    # the agent's directory
    server {
        listen       127.0.0.1:$GOOD ssl;
        server_name  localhost;
        root $d/good;
    }

    # a directory that moved: never followed
    server {
        listen       127.0.0.1:$MOVED ssl;
        server_name  localhost;
        return 301 https://localhost:$GOOD/$WELL_KNOWN;
    }

    server {
        listen       127.0.0.1:$BIG ssl;
        server_name  localhost;
        root $d/big;
    }

    # a good directory, but at an address no directory is fetched from
    server {
        listen       127.0.0.2:$PRIVATE ssl;
        server_name  localhost;
        root $d/good;
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $AGENT = "https://localhost:$GOOD";

# A request signed with the agent's key (Crawlward::Sign): what the module made of it.
sub signed {
	my ($path) = @_;
	my $r = get($path, ua => $CHROME, headers => [ signed_headers($d, key => "$d/agent.pem",
		keyid => 'agent-key-1', agent => $AGENT) ]);
	return join(' ', map { header($r, $_) // '-' } qw/ X-Signature X-Agent X-Verdict /);
}

# crawlward update-ranges, its output and exit status
sub update {
	my (@more) = @_;
	local $ENV{CRAWLWARD_TEST_DIRECTORY_ADDRESSES} = '127.0.0.1';
	my ($status, $out) = run_bounded(60, crawlward_bin(), 'update-ranges', "$d/policy.yaml",
		'--out', $dir, '--root', $d, '--ranges-dir', "$d/ranges",
		'--timeout', 5, '--no-reload', @more);
	return ($status >> 8, $out);
}

sub key_file { return join('', file_lines("$dir/crawlward-signature-keys.json")); }

like(join("\n", file_lines("$dir/crawlward-http.conf")),
	qr!^\s*crawlward_signatures keys=\Q$dir\E/crawlward-signature-keys\.json skew=60s hosts=localhost;$!m,
	'the rendered configuration loads the key file');
unlike(key_file(), qr/\Q$AGENT\E/, 'no keys before the first fetch');
is(signed('/before'), 'unverified - none', 'signed before the keys are fetched: unverified');

# the test's CA is not among the built-in roots
my ($status, $out) = update();
is($status, 5, 'a certificate from an unknown authority: some downloads failed');
like($out, qr!^failed    directory \Q$AGENT\E: .*(?i:issuer|certificate).*; no copy: its signatures stay unverified$!m,
	'the directory is not taken over TLS it cannot check') or diag($out);

($status, $out) = update('--ca-file', "$d/ca.pem");
is($status, 5, 'three directories refused: exit status 5');
like($out, qr!^changed   directory \Q$AGENT\E: 1 key \(was none\)$!m, 'the agent\'s directory fetched')
	or diag($out);
like($out, qr!^failed    directory https://localhost:$MOVED: HTTP 301 to https://localhost:$GOOD/\Q$WELL_KNOWN\E: .*no redirect is followed; no copy!m,
	'a redirect is not followed');
like($out, qr!^failed    directory https://localhost:$BIG: more than the 64 KiB a directory may hold; no copy!m,
	'a directory over 64 KiB is refused');
like($out, qr!^failed    directory https://127\.0\.0\.2:$PRIVATE: .*127\.0\.0\.2 is in 127\.0\.0\.0/8: a directory is never fetched from a special-purpose address; no copy!m,
	'a directory at a loopback address is never fetched');
like($out, qr!^rendered  \Q$dir\E/crawlward-signature-keys\.json$!m, 'the key file rendered again');
like(key_file(), qr/"\Q$AGENT\E": \{\s*"keys": \[\s*\{[^}]*"x": "\Q$X\E"/s, 'the key file holds the agent\'s key');
unlike(key_file(), qr/localhost:(?:$MOVED|$BIG)|127\.0\.0\.2/, 'and nothing from the refused directories');
ok(-f "$d/ranges/signature-directory-localhost_$GOOD.json", 'the fetched copy is kept beside the range files');

ok(reload_workers($t), 'nginx reloaded');
is(signed('/after'), 'verified Example-Agent verified', 'signed with the directory\'s key: the agent, verified');

# the same directory again: nothing changes
($status, $out) = update('--ca-file', "$d/ca.pem");
like($out, qr!^unchanged directory \Q$AGENT\E: 1 key$!m, 'fetched again: unchanged');

# the directory goes away: the kept key stays
unlink("$d/good/$WELL_KNOWN");
($status, $out) = update('--ca-file', "$d/ca.pem");
like($out, qr!^failed    directory \Q$AGENT\E: HTTP 404: a directory is taken from a 200 only; keeping the copy from \S+ \(1 key\)$!m,
	'a failed fetch keeps the last good copy') or diag($out);
like(key_file(), qr/"x": "\Q$X\E"/, 'and the key file keeps its key');
ok(reload_workers($t), 'nginx reloaded');
is(signed('/kept'), 'verified Example-Agent verified', 'the kept key still verifies');

###############################################################################
