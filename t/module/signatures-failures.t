#!/usr/bin/perl

# What a flood of forged Web Bot Auth signatures costs: each one that names
# a known key id costs the worker an Ed25519 verification. Past
# module.signatures.failures_per_minute failures from one address in a
# minute, the rest of that minute's signatures from it are not checked:
# unverified (the ordinary policy applies), never invalid. A real agent's
# signatures from another address still verify. Counted in the status
# endpoint and Prometheus, and said once in the error log.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign qw/ new_key public_x /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(14);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  trusted_proxies: [127.0.0.1]
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-failures
  throttle_log: /var/log/nginx/failures-throttled.log
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
    hosts: [localhost]
    failures_per_minute: 3
EOF
my $dir = render($t, "$d/policy.yaml");
like(join("\n", file_lines("$dir/crawlward-http.conf")),
	qr!^\s*crawlward_signatures keys=\S+ skew=60s hosts=localhost failures=3;$!m,
	'rendered: three failures a minute');

new_key("$d/agent.pem");
new_key("$d/forger.pem");
my $X = public_x("$d/agent.pem");
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

    log_format signed '\$request_uri \$remote_addr \$status \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/signed.log signed;

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

# the header lines of a request signed with KEY under the agent's key id k1
sub signed {
	my ($key) = @_;
	return [ Crawlward::Sign::signed_headers($d, key => "$d/$key.pem", keyid => 'k1') ];
}

# the allowance is per minute: start early in one, so that the sequence stays in it
sleep(61 - time() % 60) if time() % 60 > 40;

my @forged = map { get("/forged/$_", ua => $CHROME, xff => '192.0.2.1', headers => signed('forger')) } 1 .. 3;
is(join(' ', map { status($_) // 'closed' } @forged), 'closed closed closed',
	'three forged signatures: invalid, spoofed claims (444)');
ok(wait_error_log($t, qr/crawlward: 3 signatures from 192\.0\.2\.1 were verified for nothing this minute \(failed, replayed or from a directory taken from traffic\): its others this minute are not checked \(unverified\), in this worker/),
	'error log: the address, once its allowance is used up');
is(status(get('/forged/4', ua => $CHROME, xff => '192.0.2.1', headers => signed('forger'))), 200,
	'the fourth: not checked, unverified, and the ordinary policy lets the browser in');
is(status(get('/real/1', ua => $CHROME, xff => '192.0.2.1', headers => signed('agent'))), 200,
	'the agent\'s own key from that address this minute: not checked either');
is(status(get('/real/2', ua => $CHROME, xff => '192.0.2.2', headers => signed('agent'))), 200,
	'the agent\'s key from another address: 200');

wait_file_lines("$d/signed.log", 6);
my @log = file_lines("$d/signed.log");
ok((grep { m!^/forged/1 192\.0\.2\.1 444 .* signature=invalid signer=https://agent\.example! } @log),
	'logged: a forged signature checked, invalid');
ok((grep { m!^/forged/4 192\.0\.2\.1 200 .* signature=unverified signer=https://agent\.example! } @log),
	'logged: the fourth unverified');
ok((grep { m!^/real/1 192\.0\.2\.1 200 .* signature=unverified ! } @log),
	'logged: the real signature from that address unverified');
ok((grep { m!^/real/2 192\.0\.2\.2 200 .* signature=verified signer=https://agent\.example! } @log),
	'logged: the real signature from another address verified');
is(scalar(grep { /verified for nothing this minute/ } error_log_lines($t)), 1, 'said once');

my $st = module_status('/crawlward-status');
is_deeply([ map { $st->{signatures}{requests}{$_} } qw/ verified unverified invalid / ], [ 1, 2, 3 ],
	'status: verified, unverified and invalid');
is_deeply([ $st->{signatures}{not_checked}, $st->{signatures}{failures_per_minute} ], [ 2, 3 ],
	'status: two not checked, of an allowance of three');
like(body(get('/crawlward-status?format=prometheus', ua => undef)) // '',
	qr/^crawlward_signatures_not_checked_total 2$/m, 'Prometheus: not checked');

###############################################################################
