# Crawlward::DNS, the tests' DNS server, on its own (no nginx): PTR/A/AAAA from a table, NXDOMAIN, NODATA, SERVFAIL, REFUSED, silence, delays, case, records-file reloads, the query log, TCP, EDNS0, compression pointers, malformed packets, and that it exits on SIGTERM or when its parent goes.

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use POSIX qw/ WNOHANG _exit /;
use Time::HiRes qw/ time sleep /;

use Test::Nginx;
use Crawlward::DNS qw/ :all /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->plan(59);

my $d = $t->testdir();
# No nginx runs here, but a Test::Nginx object checks error.log for alerts at
# its end (nginx-tests' lib dies when the file is missing): an empty one.
$t->write_file('error.log', '');
my $port = port(8053, udp => 1);
my $log = "$d/dns.log";
my $file = "$d/dns.records";

my $GOOGLE = 'crawl-127-0-0-2.googlebot.com';
my $PTR4 = reverse_name('127.0.0.2');
my $PTR6 = reverse_name('::1');

my %records = (
	$PTR4 => { PTR => $GOOGLE },
	$GOOGLE => { A => '127.0.0.2' },
	$PTR6 => { PTR => 'host.example' },
	'host.example' => { AAAA => '::1' },
	'multi.example' => { A => [ '127.0.0.3', '127.0.0.4' ],
		AAAA => [ '::3', '::4' ], ttl => 5 },
	'alias.example' => { CNAME => 'host.example' },
	'empty.example' => {},
	'fail.example' => { servfail => 1 },
	'refuse.example' => { refused => 1 },
	'quiet.example' => { silent => 1 },
	'slow.example' => { A => '127.0.0.5', delay => 0.5 },
	'x.a' => { A => '127.0.0.6' },
	'counted.example' => { A => '127.0.0.8' },
);

write_records($file, \%records);

$t->run_daemon(\&Crawlward::DNS::run,
	port => $port,
	tcp => port(8053, udp => 1, socket => 1),
	records_file => $file,
	log => $log);

# "NOERROR data data ...", "NXDOMAIN", or "timeout"
sub answer {
	my ($r) = @_;
	return 'timeout' unless defined $r;
	return join ' ', $r->{rcode}, map { $_->{data} } @{ $r->{answers} };
}

sub raw_answer {
	my ($pkt, %o) = @_;
	my $reply = query_raw($port, $pkt, %o);
	return 'timeout' unless defined $reply;
	my $r = eval { parse_response($reply) };
	return $r ? answer($r) : "malformed reply: $@";
}

sub alive {
	my ($pid) = @_;
	return 0 unless kill 0, $pid;
	if (open(my $fh, '<', "/proc/$pid/stat")) {
		my $stat = <$fh>;
		return 0 if defined $stat && $stat =~ /\)\s+Z\s/;
	}
	return 1;
}

###############################################################################

ok(wait_dns($port), 'server answers');
ok(-e $log, 'log file created at start');

is($PTR4, '2.0.0.127.in-addr.arpa', 'reverse_name IPv4');
is($PTR6, '1.' . ('0.' x 31) . 'ip6.arpa', 'reverse_name ::1');
is(reverse_name('2001:db8::5'), '5.' . ('0.' x 23) . '8.b.d.0.1.0.0.2.ip6.arpa',
	'reverse_name IPv6');

# answers

my $r = query($port, $PTR4, 'PTR');
is(answer($r), "NOERROR $GOOGLE", 'PTR 127.0.0.2');
is(join(' ', map { $r->{answers}[0]{$_} } qw/ name type ttl /),
	"$PTR4 PTR 300", 'PTR answer owner, type, default ttl');
is(join(' ', map { "$_=$r->{$_}" } qw/ qr aa rd ra tc /),
	'qr=1 aa=1 rd=1 ra=1 tc=0', 'flags');

is(answer(query($port, $PTR6, 'PTR')), 'NOERROR host.example',
	'PTR ::1 (ip6.arpa)');
is(answer(query($port, $GOOGLE, 'A')), 'NOERROR 127.0.0.2', 'A');
is(answer(query($port, 'host.example', 'AAAA')), 'NOERROR ::1', 'AAAA');

$r = query($port, 'multi.example', 'A');
is(answer($r), 'NOERROR 127.0.0.3 127.0.0.4', 'two A answers');
is(join(' ', map { $_->{ttl} } @{ $r->{answers} }), '5 5', 'ttl per name');
is(answer(query($port, 'multi.example', 'AAAA')), 'NOERROR ::3 ::4',
	'two AAAA answers');

$r = query($port, 'alias.example', 'AAAA');
is(join(' ', map { "$_->{name}/$_->{type}/$_->{data}" } @{ $r->{answers} }),
	'alias.example/CNAME/host.example host.example/AAAA/::1',
	'CNAME followed in the table');

# errors and empty answers

is(answer(query($port, 'unknown.example', 'A')), 'NXDOMAIN', 'NXDOMAIN');
is(answer(query($port, $GOOGLE, 'AAAA')), 'NOERROR', 'NODATA: other type');
is(answer(query($port, 'empty.example', 'A')), 'NOERROR',
	'NODATA: name without records');
is(answer(query($port, 'fail.example', 'A')), 'SERVFAIL', 'SERVFAIL');
is(answer(query($port, 'refuse.example', 'PTR')), 'REFUSED', 'REFUSED');
is(answer(query($port, $GOOGLE, 'A', class => 3)), 'REFUSED',
	'class CH refused');

my $t0 = time();
$r = query($port, 'quiet.example', 'A', timeout => 1);
my $took = time() - $t0;
is(answer($r), 'timeout', 'silent: no answer');
ok($took >= 0.9 && $took < 2.5, "silent: query times out in its bound "
	. sprintf('(%.2fs)', $took));

# a delayed answer does not hold up the others

my ($pkt) = make_query('slow.example', 'A');
my $s = IO::Socket::INET->new(Proto => 'udp', PeerAddr => "127.0.0.1:$port")
	or die "Can't create UDP socket: $!\n";
$t0 = time();
$s->send($pkt);

$r = query($port, $GOOGLE, 'A');
ok(defined $r && $r->{elapsed} < 0.4, 'others answered during a delay');

my $reply;
my $rin = '';
vec($rin, fileno $s, 1) = 1;
$s->recv($reply, 65535) if select(my $rout = $rin, undef, undef, 3) > 0;
$took = time() - $t0;
is(defined $reply ? answer(parse_response($reply)) : 'timeout',
	'NOERROR 127.0.0.5', 'delay: answer');
ok($took >= 0.45 && $took < 2, sprintf('delay: after 0.5s (%.2fs)', $took));

# case

$r = query($port, 'CRAWL-127-0-0-2.GoogleBot.COM.', 'a');
is(answer($r), 'NOERROR 127.0.0.2', 'case-insensitive');
is("$r->{question} $r->{answers}[0]{name}",
	'CRAWL-127-0-0-2.GoogleBot.COM CRAWL-127-0-0-2.GoogleBot.COM',
	'question case preserved in the answer');
is(answer(query($port, uc $PTR6, 'PTR')), 'NOERROR host.example',
	'case-insensitive ip6.arpa');

# transports and wire format

is(answer(query($port, $PTR4, 'PTR', tcp => 1)), "NOERROR $GOOGLE", 'TCP');
is(answer(query($port, 'host.example', 'AAAA', edns => 1)), 'NOERROR ::1',
	'EDNS0 OPT record ignored');

# "2.0.0.127" then a pointer forward to "in-addr.arpa" after the question
is(raw_answer(pack('n6', 0x1234, 0x0100, 1, 0, 0, 0)
	. "\x012\x010\x010\x03127" . pack('n', 0xc000 | 28) . pack('n2', 12, 1)
	. "\x07in-addr\x04arpa\x00"), "NOERROR $GOOGLE",
	'compression pointer in the question (forward)');

# ID 0x0161 and flags 0 read as the name "a": "x" then a pointer to 0
is(raw_answer(pack('n6', 0x0161, 0, 1, 0, 0, 0) . "\x01x\xc0\x00"
	. pack('n2', 1, 1)), 'NOERROR 127.0.0.6',
	'compression pointer in the question (into the header)');

# malformed packets: no answer, no log line, no harm

my $q = sub { pack('n6', int(rand(65536)), 0x0100, @_) };
my $never = "\x05never\x07example\x00";
my @bad = (
	'',
	"\x00",
	'x' x 11,
	$q->(1, 0, 0, 0),					# no question
	$q->(1, 0, 0, 0) . "\x3fabc",				# short label
	$q->(1, 0, 0, 0) . "\xc0\x0c" . pack('n2', 1, 1),	# loop
	$q->(1, 0, 0, 0) . "\xc0\x0e\xc0\x0c" . pack('n2', 1, 1),
	$q->(1, 0, 0, 0) . "\xc1\xff" . pack('n2', 1, 1),	# out of range
	$q->(1, 0, 0, 0) . "\x41abc\x00" . pack('n2', 1, 1),	# label type
	$q->(1, 0, 0, 0) . ("\x3f" . 'a' x 63) x 5 . "\x00" . pack('n2', 1, 1),
	$q->(1, 0, 0, 0) . $never,				# no type
	$q->(1, 0, 0, 0) . $never . "\x00",			# half a type
	$q->(2, 0, 0, 0) . ($never . pack('n2', 1, 1)) x 2,	# 2 questions
	pack('n6', 7, 0x8180, 1, 0, 0, 0) . $never . pack('n2', 1, 1),
);

my $bs = IO::Socket::INET->new(Proto => 'udp', PeerAddr => "127.0.0.1:$port")
	or die "Can't create UDP socket: $!\n";
$bs->send($_) for @bad;

my $replies = 0;
$rin = '';
vec($rin, fileno $bs, 1) = 1;
while (select(my $rout = $rin, undef, undef, 0.5) > 0) {
	last unless defined $bs->recv(my $buf, 65535);
	$replies++;
}
is($replies, 0, 'malformed packets get no answer');

# random bytes; random bytes after a query header; valid queries with
# random bytes changed (past the ID)
srand(20240601);
my $valid = make_query('fuzz.example', 'PTR', edns => 1);
for (1 .. 100) {
	my $junk = join '', map { chr int rand 256 } 1 .. 1 + int rand 80;
	$bs->send(substr($junk, 0, 12 + int rand 20));
	$bs->send($q->(1, 0, 0, 0) . $junk);
	my $m = $valid;
	substr($m, 2 + int(rand(length($m) - 2)), 1) = chr int rand 256
		for 1 .. 1 + int rand 4;
	$bs->send($m);

	# paced, so that none is lost to a full socket buffer
	sleep 0.01 unless $_ % 10;
}

my $ts = IO::Socket::INET->new(Proto => 'tcp',
	PeerAddr => "127.0.0.1:$port") or die "Can't connect: $!\n";
$ts->syswrite(pack('n', 100) . 'short');
close $ts;

is(answer(query($port, $GOOGLE, 'A')), 'NOERROR 127.0.0.2',
	'alive after malformed packets');
is(query_count($log, undef, 'never.example'), 0,
	'malformed packets not logged');

# reconfiguration through the records file

write_records($file, { %records, $GOOGLE => { servfail => 1 },
	'new.example' => { A => '127.0.0.7' } });
is(answer(query($port, $GOOGLE, 'A')), 'SERVFAIL', 'reload: now SERVFAIL');
is(answer(query($port, 'new.example', 'A')), 'NOERROR 127.0.0.7',
	'reload: new name');

write_records($file, { %records, $GOOGLE => { silent => 1 } });
is(answer(query($port, $GOOGLE, 'A', timeout => 0.5)), 'timeout',
	'reload: now silent');

write_records($file, \%records);
is(answer(query($port, $GOOGLE, 'A')), 'NOERROR 127.0.0.2',
	'reload: good again');
is(answer(query($port, 'new.example', 'A')), 'NXDOMAIN',
	'reload: name gone');

# the query log

query($port, 'counted.example', 'A') for 1 .. 2;
query($port, 'Counted.Example', 'A');
query($port, 'counted.example', 'AAAA');

is(query_count($log, 'A', 'counted.example'), 3, 'count A');
is(query_count($log, 'aaaa', 'COUNTED.example.'), 1, 'count AAAA');
is(query_count($log, undef, 'counted.example'), 4, 'count any type');
is_deeply([ (queries($log))[-4 .. -1] ], [
	'A counted.example', 'A counted.example', 'A Counted.Example',
	'AAAA counted.example'
], 'queries in order, as sent');
is(query_count($log, 'A', 'quiet.example'), 1, 'silent query logged');
is(query_count($log, 'PTR', $PTR4), 3, 'PTR 127.0.0.2 logged (UDP, TCP, '
	. 'compressed)');

my $n = () = queries($log);
wait_dns($port);
is(scalar(() = queries($log)), $n, 'readiness probe not logged');

# cross-check with dig

SKIP: {
	skip 'no dig', 3 unless grep { -x "$_/dig" } split /:/, $ENV{PATH};

	my $dig = "dig \@127.0.0.1 -p $port +short +time=2 +tries=1";
	is(`$dig -x 127.0.0.2 2>&1`, "$GOOGLE.\n", 'dig -x 127.0.0.2');
	is(`$dig -x ::1 2>&1`, "host.example.\n", 'dig -x ::1');
	is(`$dig host.example AAAA 2>&1`, "::1\n", 'dig AAAA');
}

# start(): a second server in one call

my $dns = Crawlward::DNS->start($t, port => port(8054, udp => 1), ttl => 60,
	records => { 'static.example' => { A => '127.0.0.9' } });

$r = $dns->query('static.example', 'A');
is(answer($r), 'NOERROR 127.0.0.9', 'start()');
is($r->{answers}[0]{ttl}, 60, 'start(): server ttl');
$dns->set_records({ 'static.example' => { refused => 1 } });
is(answer($dns->query('static.example', 'A')), 'REFUSED', 'set_records()');
is($dns->query_count('A', 'STATIC.example'), 2, '$dns->query_count');

# bounded: exits on SIGTERM, and when its parent is gone

my $port3 = port(8055, udp => 1);
my $pid = fork();
die "Can't fork: $!\n" unless defined $pid;
Crawlward::DNS::run(port => $port3) if $pid == 0;

ok(wait_dns($port3), 'server for SIGTERM up');
kill 'TERM', $pid;
$t0 = time();
my $status;
while (time() - $t0 < 3) {
	if (waitpid($pid, WNOHANG) == $pid) {
		$status = $?;
		last;
	}
	sleep 0.05;
}
$took = time() - $t0;
ok(defined $status && $status == 0 && $took < 1.5,
	sprintf('SIGTERM: exits, status 0 (%.2fs)', $took));

my $port4 = port(8056, udp => 1);
my $middle = fork();
die "Can't fork: $!\n" unless defined $middle;

if ($middle == 0) {
	my $server = fork();
	_exit(2) unless defined $server;
	Crawlward::DNS::run(port => $port4) if $server == 0;

	open(my $fh, '>', "$d/orphan.pid") or _exit(3);
	print {$fh} $server;
	close $fh;
	_exit(wait_dns($port4) ? 0 : 1);
}

waitpid($middle, 0);
is($? >> 8, 0, 'orphaned server was up when its parent exited');

my $orphan = $t->read_file('orphan.pid');
my $gone;
for (1 .. 60) {
	last if $gone = !alive($orphan);
	sleep 0.05;
}
ok($gone, 'orphaned server exits');
kill 'KILL', $orphan unless $gone;

###############################################################################
