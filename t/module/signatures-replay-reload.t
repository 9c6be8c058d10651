#!/usr/bin/perl

# A replay zone over reloads. Each directory of the key file has its part of
# the zone at its place in the file's list, so a reload whose key file lists
# another directory before it moves its part: the first new worker moves
# every live nonce to its directory's new part (a notice says how many), and
# a signature seen before the reload is still a replay after it, whichever
# worker answers: each of the new ones, and one of the previous
# configuration that was still reading the request's headers. A reload with
# the same directories keeps the zone as it is.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::Sign qw/ new_key public_x /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http/);
plan(skip_all => 'no openssl') unless `openssl version 2>/dev/null` =~ /^OpenSSL [3-9]/;
$t->plan(19);

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
    # every replay counts against the address's allowance: more than the test sends
    failures_per_minute: 1000
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
        # each connection to either worker, as the kernel spreads them
        listen       127.0.0.1:%%PORT_8080%% reuseport;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            add_header X-Pid \$pid always;
            add_header X-Signature \$crawlward_signature always;
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

my $refused = 0;

# requests signed with HEADERS, each on its own connection, until both workers
# have answered (at most 40): the statuses in order, repeats left out, and how
# many workers answered
sub from_both {
	my ($headers) = @_;
	my (%pids, @seq);
	for (1 .. 40) {
		my $r = get('/page', ua => $CHROME, headers => $headers);
		my $st = status($r) // 'closed';
		$refused++ if $st eq '429';
		push @seq, $st unless @seq && $seq[-1] eq $st;
		$pids{header($r, 'X-Pid')} = 1 if defined header($r, 'X-Pid');
		last if keys %pids >= 2;
	}
	return join(' ', @seq) . ' from ' . scalar(keys %pids) . ' workers';
}

# a request signed with HEADERS whose headers are all sent but the blank line
# that ends them: a worker reads it, and answers once the line comes
sub hold {
	my ($headers) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1:' . port(8080), Timeout => 5)
		or die "can't connect: $@\n";
	print $s "GET /page HTTP/1.0\x0d\x0aHost: localhost\x0d\x0aUser-Agent: $CHROME\x0d\x0a"
		. join('', map { "$_\x0d\x0a" } @$headers);
	return $s;
}

# the held request's answer: its status, the worker's pid and $crawlward_signature
sub finish {
	my ($s) = @_;
	my $answer = '';
	eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		alarm(10);
		print $s "\x0d\x0a";
		$answer = join '', <$s>;
		alarm(0);
	};
	alarm(0);
	close $s;
	$refused++ if $answer =~ m!^HTTP/1\.[01] 429!;
	return (($answer =~ m!^HTTP/1\.[01] (\d+)!)[0], ($answer =~ /^X-Pid: (\d+)/mi)[0], ($answer =~ /^X-Signature: (\S+)/mi)[0]);
}

my $before = signed('n-before');
is(from_both($before), '200 429 from 2 workers', 'a verified signature: 200, then replayed: 429 in either worker');

# a replay of it held across a reload whose key file lists https://a0.example before
# https://agent.example: the agent's part moves
my %previous = map { $_ => 1 } worker_pids($t);
my $held = hold($before);
select(undef, undef, undef, 0.3);
key_file('https://agent.example', 'https://a0.example', 'https://zz.example');
kill 'HUP', $t->read_file('nginx.pid') =~ /(\d+)/;
ok(wait_error_log($t, qr/crawlward_signatures replay zone "crawlward_replay": the key file's directories changed: 1 nonces moved to their directories' new parts, 0 dropped with their directory, 0 lost/, 1, 10),
	'reloaded with two more directories: a notice, the nonce moved to its directory\'s new part');
my ($status, $pid) = finish($held);
is($status, 429, 'the previous configuration\'s worker, after the nonces moved: still a replay');
ok($pid && $previous{$pid}, 'answered by a worker of the previous configuration');
# the previous configuration's workers gone, only the new ones answer
for (1 .. 200) {
	last unless grep { $previous{$_} } worker_pids($t);
	select(undef, undef, undef, 0.05);
}

is(from_both($before), '429 from 2 workers', 'the new workers: the signature seen before the reload is still a replay');
is(from_both(signed('n-after')), '200 429 from 2 workers', 'a new nonce: 200, then replayed: 429');
is(scalar(grep { /the key file's directories changed/ } error_log_lines($t)), 1, 'moved by one worker only');

# https://zz.example's signature, then a replay of it held across a reload that drops the
# directory: its signature no longer verifies, in a worker of either configuration
my $zz = [ Crawlward::Sign::signed_headers($d, key => "$d/other.pem", keyid => 'k1', nonce => 'z-1',
	agent => 'https://zz.example') ];
is(from_both($zz), '200 429 from 2 workers', 'another directory\'s signature: 200, then replayed: 429');
my $zz_bare = [ Crawlward::Sign::signed_headers($d, key => "$d/other.pem", keyid => 'k1', nonce => undef,
	agent => 'https://zz.example') ];
%previous = map { $_ => 1 } worker_pids($t);
$held = hold($zz);
my $held_bare = hold($zz_bare);
select(undef, undef, undef, 0.3);
key_file('https://a0.example', 'https://agent.example');
kill 'HUP', $t->read_file('nginx.pid') =~ /(\d+)/;
ok(wait_error_log($t, qr/directories changed: 2 nonces moved to their directories' new parts, 1 dropped with their directory, 0 lost/, 1, 10),
	'reloaded without https://zz.example: the agent\'s two nonces moved, https://zz.example\'s dropped');
my $signature;
($status, $pid, $signature) = finish($held);
is(join(' ', $status // '-', $signature // '-'), '200 unverified',
	'the previous configuration\'s worker: the dropped directory\'s signature is unverified, not a verified one let through');
ok($pid && $previous{$pid}, 'answered by a worker of the previous configuration');
($status, $pid, $signature) = finish($held_bare);
is(join(' ', $status // '-', $signature // '-', $pid && $previous{$pid} ? 'previous' : 'new'), '200 unverified previous',
	'and its signature without a nonce: unverified too');
for (1 .. 200) {
	last unless grep { $previous{$_} } worker_pids($t);
	select(undef, undef, undef, 0.05);
}
is(from_both($before), '429 from 2 workers', 'the first nonce is still a replay');
is(from_both(signed('n-after')), '429 from 2 workers', 'and so is the second');

# the same directories: the zone is kept as it is
ok(reload_workers($t), 'reloaded with the same key file');
is(from_both(signed('n-after')), '429 from 2 workers', 'still a replay');
is(scalar(grep { /the key file's directories changed/ } error_log_lines($t)), 2, 'no nonce moved for the same directories');

my $st = module_status('/crawlward-status');
is_deeply([ map { $st->{signatures}{replay}{$_} } qw/ first replayed not_checked / ], [ 3, $refused, 0 ],
	'status: the counts carry over every reload');
is(scalar(grep { /\[(alert|crit|emerg)\]| [1-9]\d* lost / } error_log_lines($t)), 0, 'no alert, and no nonce lost');

###############################################################################
