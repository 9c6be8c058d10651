#!/usr/bin/perl

# A replay zone over reloads. Each directory of the key file has its part of
# the zone at its place in the file's list, so a reload whose key file lists
# another directory before it moves its part: the first new worker moves
# every live nonce to its directory's new part (a notice says how many), and
# a signature seen before the reload is still a replay after it, whichever
# worker answers. A reload with the same directories keeps the zone as it is.

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
$t->plan(14);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<"EOF");
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-replay
  throttle_log: /var/log/nginx/replay-throttled.log
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
    replay_zone: 64k
    hosts: [localhost]
EOF
my $dir = render($t, "$d/policy.yaml");

new_key("$d/agent.pem");
new_key("$d/other.pem");
my ($X, $Y) = (public_x("$d/agent.pem"), public_x("$d/other.pem"));
my $keys = "$dir/crawlward-signature-keys.json" =~ s!^\Q$d\E/!!r;

# the key file with these directories: https://agent.example holds the agent's key
# (written with $d: a named sub that held $t would keep it past the tests' end)
sub key_file {
	my (@directories) = @_;
	my $x = sub { $_[0] eq 'https://agent.example' ? $X : $Y };
	open my $f, '>', "$d/$keys" or die "$keys: $!";
	print $f '{"format": 1, "directories": {'
		. join(', ', map { qq!"$_": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": "! . $x->($_) . '"}]}' } @directories)
		. "}}\n";
	close $f;
}
key_file('https://agent.example');

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 2;

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

my $CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

sub signed {
	my ($nonce) = @_;
	return [ Crawlward::Sign::signed_headers($d, key => "$d/agent.pem", keyid => 'k1', nonce => $nonce) ];
}

# each of two requests on its own connection, so that both workers are asked
sub twice {
	my ($headers) = @_;
	return join ' ', map { status(get('/page', ua => $CHROME, headers => $headers)) // 'closed' } 1 .. 2;
}

my $before = signed('n-before');
is(twice($before), '200 429', 'a verified signature: 200, then replayed: 429');

# https://a0.example sorts before https://agent.example: the agent's part moves
key_file('https://agent.example', 'https://a0.example', 'https://zz.example');
ok(reload_workers($t), 'reloaded with two more directories');
ok(wait_error_log($t, qr/crawlward_signatures replay zone "crawlward_replay": the key file's directories changed: 1 nonces moved to their directories' new parts, 0 dropped/, 1, 5),
	'a notice: the nonce moved to its directory\'s new part');
is(scalar(grep { /the key file's directories changed/ } error_log_lines($t)), 1, 'moved by one worker only');
is(twice($before), '429 429', 'the signature seen before the reload is still a replay');
is(twice(signed('n-after')), '200 429', 'a new nonce: 200, then replayed: 429');

# the agent's directory moves again, and another is dropped
key_file('https://a0.example', 'https://agent.example');
ok(reload_workers($t), 'reloaded without https://zz.example');
is(twice($before), '429 429', 'the first nonce is still a replay');
is(twice(signed('n-after')), '429 429', 'and so is the second');

# the same directories: the zone is kept as it is
ok(reload_workers($t), 'reloaded with the same key file');
is(twice(signed('n-after')), '429 429', 'still a replay');
is(scalar(grep { /the key file's directories changed/ } error_log_lines($t)), 2, 'no nonce moved for the same directories');

my $st = module_status('/crawlward-status');
is_deeply([ map { $st->{signatures}{replay}{$_} } qw/ first replayed / ], [ 2, 10 ],
	'status: the counts carry over every reload');
is(scalar(grep { /\[(alert|crit|emerg)\]/ } error_log_lines($t)), 0, 'no alert in the error log');

###############################################################################
