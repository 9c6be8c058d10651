#!/usr/bin/perl

# What a Web Bot Auth signature makes the module answer, from the
# configuration `crawlward render` writes for module.signatures with
# `required` and `replay_zone`: a replayed signature (its nonce seen before,
# in any worker) gets 429 with Accept-Signature; a path reserved for signed
# agents gets 403 with Accept-Signature without a verified signature;
# robots.txt and the site's own key directory answer whatever the
# signature; a dry run only logs. The nonces are counted in the status
# endpoint and Prometheus.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign qw/ new_key public_x /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(30);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-enforce
  throttle_log: /var/log/nginx/enforce-throttled.log
catalogue:
  builtin: false
  agents:
    - name: Example-Agent
      operator: Example
      purpose: ai-user
      robots_only: true
      signature_agent: https://agent.example
robots: {}
module:
  status: /crawlward-status
  signatures:
    required: [/agents/]
    replay_zone: 64k
    hosts: [localhost]
EOF
my $dir = render($t, "$d/policy.yaml");
like(join("\n", file_lines("$dir/crawlward-http.conf")),
	qr!^\s*crawlward_signatures keys=\S+ skew=60s hosts=localhost replay=crawlward_replay:64k;$!m,
	'rendered: the replay zone');

new_key("$d/agent.pem");
my $X = public_x("$d/agent.pem");
# the keys update-ranges would have fetched, in the rendered key file
$t->write_file("$dir/crawlward-signature-keys.json" =~ s!^\Q$d\E/!!r, <<"EOF");
{"format": 1, "directories": {
  "https://agent.example": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": "$X"}]}
}}
EOF

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    log_format signed '\$request_uri \$status \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/signed.log signed;

        location /dry/ {
            crawlward_dry_run on;
            root $d/www;
            try_files /page.html =404;
        }

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $ACCEPT = 'sig1=("@authority" "signature-agent");created;expires;keyid;nonce;tag="web-bot-auth"';

# The headers of a request signed with the agent's key (Crawlward::Sign):
# NONCE as given (undef: none), the directory AGENT.
sub signed_headers {
	my (%o) = @_;
	return [ Crawlward::Sign::signed_headers($d, key => "$d/agent.pem", keyid => 'k1', nonce => undef, %o) ];
}

my $once = signed_headers(nonce => 'n-once');
my $r = get('/page', ua => $CHROME, headers => $once);
is(status($r), 200, 'a verified signature, first seen: 200');
is(header($r, 'Accept-Signature'), undef, 'and no Accept-Signature');
$r = get('/page', ua => $CHROME, headers => $once);
is(status($r), 429, 'the same signature again: 429');
is(header($r, 'Accept-Signature'), $ACCEPT, 'with Accept-Signature: what to sign afresh');
$r = get('/other', ua => $CHROME, headers => $once);
is(status($r), 429, 'replayed on another path: 429');
$r = get('/robots.txt', ua => $CHROME, headers => $once);
is(status($r), 200, 'robots.txt with a replayed signature: 200');
$r = get('/dry/page', ua => $CHROME, headers => $once);
is(status($r), 200, 'a dry run lets a replay through');
ok(wait_error_log($t, qr/crawlward: dry run, would refuse with 429: a replayed signature \(its nonce was seen before\), signature verified, signer "https:\/\/agent\.example"/),
	'and logs what it would have done');
ok(grep({ /crawlward: refused with 429: a replayed signature \(its nonce was seen before\), signature verified, signer "https:\/\/agent\.example"/ } error_log_lines($t)),
	'the refusal is logged');

# a fresh nonce is a fresh signature; none is not checked
is(status(get('/page', ua => $CHROME, headers => signed_headers(nonce => 'n-fresh'))), 200,
	'a fresh nonce: 200');
my $bare = signed_headers();
is(status(get('/page', ua => $CHROME, headers => $bare)), 200, 'no nonce: 200');
is(status(get('/page', ua => $CHROME, headers => $bare)), 200, 'no nonce, again: 200 (not checked, never a replay)');

# a path for signed agents
$r = get('/agents/search', ua => $CHROME);
is(status($r), 403, 'a path for signed agents, unsigned: 403');
is(header($r, 'Accept-Signature'), $ACCEPT, 'with Accept-Signature');
$r = get('/agents/search', ua => $CHROME, headers => signed_headers(nonce => 'n-unknown',
	agent => 'https://unknown.example'));
is(status($r), 403, 'signed by a directory with no known key: 403');
$r = get('/agents/search', ua => $CHROME, headers => signed_headers(nonce => 'n-agent'));
is(status($r), 200, 'signed and verified: 200');
is(header($r, 'Accept-Signature'), undef, 'and no Accept-Signature');
is(status(get('/robots.txt', ua => $CHROME)), 200, 'robots.txt unsigned: 200');
is(status(get('/.well-known/http-message-signatures-directory', ua => $CHROME)), 200,
	'the site\'s own key directory, unsigned: not refused');
is(status(get('/page', ua => $CHROME)), 200, 'elsewhere, unsigned: 200');

# a request signed for another site, replayed here with that site's Host: a catch-all
# server takes it, but the signature was not made for this site's names
$r = get('/page', ua => $CHROME, host => 'other.example',
	headers => signed_headers(nonce => 'n-other', authority => 'other.example'));
is(status($r), undef, 'a signature made for another host: invalid, a spoofed claim (444)');
ok(wait_error_log($t, qr/crawlward: refused with 444: .*verdict spoofed/), 'and refused as spoofed');

# the log and the counts
wait_file_lines("$d/signed.log", 16);
my @log = file_lines("$d/signed.log");
ok((grep { m!^/page 200 .* signature=verified signer=https://agent\.example nonce=first$! } @log),
	'logged: nonce=first');
ok((grep { m!^/page 429 .* refusal=signature .* nonce=replayed$! } @log), 'logged: nonce=replayed, refusal=signature');
ok((grep { m!^/agents/search 403 .* refusal=signature ! } @log), 'logged: the 403 on a path for signed agents, refusal=signature');
ok((grep { m!^/page 200 .* nonce=not-checked$! } @log), 'logged: nonce=not-checked (no nonce)');

my $st = module_status('/crawlward-status');
is_deeply([ map { $st->{signatures}{replay}{$_} } qw/ zone first replayed not_checked / ],
	[ 'crawlward_replay', 3, 4, 2 ], 'status: nonces first seen, replayed and not checked');
is($st->{refusals_by_layer}{signature}, 4, 'status: refusals by signature (two replays, two 403s)');
my $prom = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
like($prom, qr/^crawlward_signature_nonces_total\{zone="crawlward_replay",nonce="replayed"\} 4$/m,
	'Prometheus: replayed nonces');

###############################################################################
