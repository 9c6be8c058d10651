#!/usr/bin/perl

# ngx_http_crawlward_module's Web Bot Auth check (crawlward_signatures),
# tried from the signer's and the attacker's side with Ed25519 keys made in
# the test (openssl): a verified request in the dictionary and the legacy
# Signature-Agent forms, a wrong key, a covered header changed on the way,
# expired, created in the future beyond the skew, no web-bot-auth tag,
# @authority not covered, an unknown directory, RFC 9421's published test
# key (never trusted), and an unsigned request; the variables, the log
# fields, the status counts and Prometheus. A verified signer whose
# directory the catalogue names is that agent, verified; an invalid
# signature is a spoofed claim (444), but never on robots.txt.

use warnings;
use strict;

use Test::More;

use MIME::Base64 qw/ encode_base64url /;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign qw/ new_key public_x /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(34);

my $d = $t->testdir();
write_page($t);
# an agent known by its signatures alone (a browser User-Agent, no token to claim)
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-signed
  throttle_log: /var/log/nginx/signed-throttled.log
catalogue:
  agents:
    - name: Example-Agent
      operator: Example
      purpose: ai-user
      robots_only: true
      signature_agent: https://agent.example
robots: {}
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");

# the agent's key, another key, and RFC 9421's test key (appendix B.1.4)
new_key("$d/$_.pem") for qw/ agent other /;
$t->write_file('rfc.pem', "-----BEGIN PRIVATE KEY-----\n"
	. "MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n"
	. "-----END PRIVATE KEY-----\n");

my $X = public_x("$d/agent.pem");
my $RFC_X = public_x("$d/rfc.pem");
is($RFC_X, 'JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs', 'the RFC\'s test key');
$t->write_file('keys.json', <<"EOF");
{"format": 1, "directories": {
  "https://agent.example": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "agent-key-1", "x": "$X"}]},
  "https://rfc.example": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "test-key-ed25519", "x": "$RFC_X"}]}
}}
EOF

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    crawlward_catalogue $dir/crawlward-catalogue.json;
    crawlward_zone zone=crawlward:1m;
    crawlward_signatures keys=$d/keys.json skew=60s;

    log_format signed '\$request_uri \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        crawlward on;
        # what the module decides, without refusing: the outcomes below are read from headers
        crawlward_dry_run on;
        access_log $d/signed.log signed;
        add_header X-Signature \$crawlward_signature always;
        add_header X-Signer \$crawlward_signature_agent always;
        add_header X-Agent \$crawlward_agent always;
        add_header X-Verdict \$crawlward_verdict always;
        add_header X-Action \$crawlward_action always;

        location = /crawlward-status {
            crawlward off;
            crawlward_status;
        }

        location = /robots.txt {
            crawlward_dry_run off;
            root $d/www;
            try_files /page.html =404;
        }

        location /enforced/ {
            crawlward_dry_run off;
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

# The headers of a request to Host: localhost signed with KEY (a file in the
# test directory) as KEYID (Crawlward::Sign).
sub signed_headers {
	my (%o) = @_;
	return Crawlward::Sign::signed_headers($d, %o, key => "$d/$o{key}");
}

sub signed_get {
	my ($path, %o) = @_;
	my $host = delete $o{host};
	my $r = get($path, ua => $CHROME, headers => [ signed_headers(%o) ],
		(defined $host ? (host => $host) : ()));
	return (header($r, 'X-Signature') // '', header($r, 'X-Signer') // '');
}

my $KEYID = 'agent-key-1';

is_deeply([ signed_get('/verified', key => 'agent.pem', keyid => $KEYID) ],
	[ 'verified', 'https://agent.example' ], 'signed by the directory\'s key: verified');
# the catalogue names the directory: the signer is that agent, verified, whatever its User-Agent
my $r = get('/named', ua => $CHROME, headers => [ signed_headers(key => 'agent.pem', keyid => $KEYID) ]);
is(join(' ', map { header($r, $_) // '' } qw/ X-Agent X-Verdict X-Action /), 'Example-Agent verified allow',
	'a verified signer is its catalogue agent, verified');
$r = get('/unnamed', ua => $CHROME, headers => [ signed_headers(key => 'agent.pem', keyid => $KEYID,
	agent => 'https://unknown.example') ]);
is(join(' ', map { header($r, $_) // '-' } qw/ X-Agent X-Verdict X-Action /), '- none allow',
	'an unknown directory decides nothing: the User-Agent does (a browser)');
$r = get('/broken', ua => $CHROME, headers => [ signed_headers(key => 'other.pem', keyid => $KEYID) ]);
is(join(' ', map { header($r, $_) // '-' } qw/ X-Agent X-Verdict X-Action /), '- spoofed block-444',
	'an invalid signature is a spoofed claim (dry run: what would happen)');
$r = get('/enforced/broken', ua => $CHROME, headers => [ signed_headers(key => 'other.pem', keyid => $KEYID) ]);
is(status($r), undef, 'an invalid signature, enforced: the connection closed (444)');
$r = get('/robots.txt', ua => $CHROME, headers => [ signed_headers(key => 'other.pem', keyid => $KEYID) ]);
is(status($r), 200, 'robots.txt with an invalid signature: 200');
$r = get('/enforced/signed', ua => $CHROME, headers => [ signed_headers(key => 'agent.pem', keyid => $KEYID) ]);
is(status($r), 200, 'a verified signer, enforced: 200');

is_deeply([ signed_get('/legacy', key => 'agent.pem', keyid => $KEYID, legacy => 1) ],
	[ 'verified', 'https://agent.example' ], 'the legacy bare-string Signature-Agent: verified');

# the key found by its RFC 7638 thumbprint as well as its kid
my $jwk = '{"crv":"Ed25519","kty":"OKP","x":"' . $X . '"}';
$t->write_file('jwk.json', $jwk);
# (in scalar context: a digest may hold a newline)
my $digest = `openssl dgst -sha256 -binary $d/jwk.json`;
my $thumbprint = encode_base64url($digest);
is((signed_get('/thumbprint', key => 'agent.pem', keyid => $thumbprint))[0],
	'verified', 'the key by its thumbprint') or diag("$jwk $thumbprint");

is((signed_get('/wrong-key', key => 'other.pem', keyid => $KEYID))[0],
	'invalid', 'another key under the directory\'s key id: invalid');
is((signed_get('/tampered', key => 'agent.pem', keyid => $KEYID,
	host => 'other.example'))[0],
	'invalid', 'signed for another host: invalid');
is((signed_get('/expired', key => 'agent.pem', keyid => $KEYID,
	created => time() - 400, expires => time() - 100))[0],
	'invalid', 'expired beyond the skew: invalid');
is((signed_get('/skewed', key => 'agent.pem', keyid => $KEYID,
	created => time() + 30, expires => time() + 330))[0],
	'verified', 'created 30 s ahead, within the skew: verified');
is((signed_get('/future', key => 'agent.pem', keyid => $KEYID,
	created => time() + 400, expires => time() + 700))[0],
	'invalid', 'created in the future beyond the skew: invalid');
is((signed_get('/long', key => 'agent.pem', keyid => $KEYID,
	expires => time() + 86401))[0],
	'invalid', 'a lifetime of more than a day: invalid');
is((signed_get('/untagged', key => 'agent.pem', keyid => $KEYID, tag => undef))[0],
	'none', 'no web-bot-auth tag: none (another protocol\'s signature)');
is((signed_get('/no-authority', key => 'agent.pem', keyid => $KEYID,
	covered => [ '"@method"', '"signature-agent";key="a1"' ]))[0],
	'invalid', '@authority not covered: invalid');
is((signed_get('/no-agent', key => 'agent.pem', keyid => $KEYID,
	covered => [ '"@authority"' ]))[0],
	'invalid', 'signature-agent not covered: invalid');
is_deeply([ signed_get('/unknown', key => 'agent.pem', keyid => $KEYID,
	agent => 'https://unknown.example') ],
	[ 'unverified', 'https://unknown.example' ],
	'a directory the key file does not hold: unverified');
is((signed_get('/rfc', key => 'rfc.pem', keyid => 'test-key-ed25519',
	agent => 'https://rfc.example'))[0],
	'unverified', 'RFC 9421\'s published test key is never trusted');

$r = get('/unsigned', ua => $CHROME);
is(header($r, 'X-Signature'), 'none', 'an unsigned request: none');
is(header($r, 'X-Signer'), undef, 'an unsigned request: no signer (an empty header is not sent)');
$r = get('/garbage', ua => $CHROME, headers => [ 'Signature-Input: s1=(((' ]);
is(header($r, 'X-Signature'), 'invalid', 'a Signature-Input that does not parse: invalid');
is(status($r), 200, 'a broken signature is no error');

# the log: what the signature said, only for a signed request
wait_file_lines("$d/signed.log", 22);
my @log = file_lines("$d/signed.log");
ok((grep { m!^/verified agent=.* signature=verified signer=https://agent\.example$! } @log),
	'logged: signature=verified signer=...');
ok((grep { m!^/unknown .* signature=unverified signer=https://unknown\.example$! } @log),
	'logged: unverified, with the directory named');
ok((grep { m!^/unsigned agent=! && !/signature=/ } @log), 'an unsigned request logs no signature');

# the status counts and Prometheus
my $st = module_status('/crawlward-status');
is_deeply($st->{signatures}{directories}, [ 'https://agent.example', 'https://rfc.example' ],
	'status: the directories of the key file');
is($st->{signatures}{requests}{verified}, 6, 'status: verified requests');
is($st->{signatures}{requests}{unverified}, 3, 'status: unverified requests');
# rfc.example is in the key file (its only key, the RFC's, refused): not unknown
is_deeply($st->{signatures}{unknown_directories}{busiest},
	[ { directory => 'https://unknown.example', requests => 2 } ],
	'status: a directory the key file does not hold, counted');
is($st->{signatures}{requests}{invalid}, 11, 'status: invalid requests');
my $prom = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
like($prom, qr/^crawlward_signed_requests_total\{signature="verified"\} 6$/m, 'Prometheus: verified');

###############################################################################
