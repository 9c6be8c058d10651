#!/usr/bin/perl

# bench/soak's load: one process of clients, each request from an address of
# its own choosing, non-blocking, CONCURRENCY requests in flight.
#   perl bench/soak.pl load PORT SECONDS ADDRESSES AGENTS CONCURRENCY
#        RATE PROCESS PROCESSES SUMMARY
# The processes together start at most RATE requests a second. Request i of
# the whole load (this process sends i = PROCESS, PROCESS + PROCESSES, ...)
# comes from address number i * 7919 mod ADDRESSES of 127.64.0.0/10 (every
# one of them once in ADDRESSES requests), with a User-Agent numbered by a
# hash of i mod AGENTS, and is one of the kinds below by another hash of i
# mod 100. At the end, SUMMARY gets one line per kind and status:
#   kind status count max_ms
# and the per-second totals of the process as "second n" lines. Every socket
# is on loopback; the loop ends at its deadline, and no request is waited on
# for more than 30 s (it counts as status "hung").

use warnings;
use strict;

use Errno qw/ EINPROGRESS EAGAIN EWOULDBLOCK /;
use Socket qw/ PF_INET SOCK_STREAM SOL_SOCKET SO_REUSEADDR IPPROTO_TCP
	inet_aton pack_sockaddr_in /;
use Fcntl qw/ F_GETFL F_SETFL O_NONBLOCK /;
use Time::HiRes qw/ time /;

my $HUNG = 30;

# kinds, by i mod 100
my @KINDS = (
	[ 48, 'browser' ],      # a browser reading a record page
	[ 10, 'facets' ],       # a browser on a browse page, two facets, no Referer
	[ 20, 'bot' ],          # a self-declared crawler of AGENTS names, rotating addresses
	[ 8, 'fake-google' ],   # Googlebot's name from rotating addresses: a PTR lookup each
	[ 2, 'gptbot' ],        # refused whatever it does
	[ 4, 'robots' ],        # robots.txt, a crawler of AGENTS names
	[ 4, 'googlebot' ],     # verified Googlebot, from its published range
	[ 2, 'dns-google' ],    # Googlebot verified by DNS, 16 addresses
	[ 1, 'hot-spoofed' ],   # Googlebot's name from one address, all the time
	[ 1, 'hot-bot' ],       # one self-declared crawler from one address, all the time
);
my @KIND_OF;
push @KIND_OF, ($_->[1]) x $_->[0] for @KINDS;
die "kinds must add up to 100\n" unless @KIND_OF == 100;

my $cmd = shift // '';
die "usage: soak.pl load ...\n" unless $cmd eq 'load';
my ($port, $seconds, $addresses, $agents, $concurrency, $rate, $me, $procs, $summary) = @ARGV;

sub address {
	my ($n) = @_;
	$n %= $addresses;
	return join '.', 127, 64 + ($n >> 16 & 63), $n >> 8 & 255, $n & 255;
}

sub request_for {
	my ($i) = @_;
	# the kind and the User-Agent's number: hashes of i, so that kinds,
	# addresses and agents do not move in step
	my $h = ($i * 2654435761) & 0xffffffff;
	my $kind = $KIND_OF[ ($h >> 8) % 100 ];
	my $u = (($h >> 4) ^ ($i >> 3)) % $agents;
	my $chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
		. "Chrome/131.0.$u.0 Safari/537.36";
	my $bot = "Mozilla/5.0 (compatible; Soakbot$u/1.0; +https://example.org/bot)";
	my $googlebot = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
	my $record = '/record/' . ($i % 100000);
	my ($from, $uri, $ua) = (address($i * 7919), $record, $chrome);
	if ($kind eq 'facets') {
		$uri = '/glam/browse?subjects=' . ($i % 900) . '&places=' . ($i % 7);
	} elsif ($kind eq 'bot') {
		$ua = $bot;
	} elsif ($kind eq 'fake-google') {
		$ua = $googlebot;
	} elsif ($kind eq 'gptbot') {
		$ua = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2)';
	} elsif ($kind eq 'robots') {
		($uri, $ua) = ('/robots.txt', $bot);
	} elsif ($kind eq 'googlebot') {
		($from, $ua) = ('127.0.2.' . ($i % 8), $googlebot);
	} elsif ($kind eq 'dns-google') {
		($from, $ua) = ('127.8.0.' . (1 + $i % 16), $googlebot);
	} elsif ($kind eq 'hot-spoofed') {
		($from, $ua) = ('127.9.9.9', $googlebot);
	} elsif ($kind eq 'hot-bot') {
		($from, $ua) = ('127.9.9.10', 'Mozilla/5.0 (compatible; Hotbot/1.0)');
	}
	return ($kind, $from, "GET $uri HTTP/1.0\r\nHost: heratio.org\r\nUser-Agent: $ua\r\n\r\n");
}

my $dest = pack_sockaddr_in($port, inet_aton('127.0.0.1'));
my %count;    # "kind status" => [count, max_ms]
my %second;   # second => requests finished
my %conn;     # fileno => { fh, kind, start, out, in }
my $t0 = time();
my $deadline = $t0 + $seconds;
my $i = $me;
my $started = 0;

sub start_one {
	my ($kind, $from, $req) = request_for($i);
	$i += $procs;
	$started++;
	socket(my $fh, PF_INET, SOCK_STREAM, 0) or die "socket: $!\n";
	setsockopt($fh, SOL_SOCKET, SO_REUSEADDR, 1);
	bind($fh, pack_sockaddr_in(0, inet_aton($from))) or die "bind $from: $!\n";
	my $flags = fcntl($fh, F_GETFL, 0);
	fcntl($fh, F_SETFL, $flags | O_NONBLOCK);
	if (!connect($fh, $dest) && $! != EINPROGRESS) {
		finish_one({ kind => $kind, start => time() }, 'refused');
		return;
	}
	$conn{ fileno $fh } = { fh => $fh, kind => $kind, start => time(), out => $req, in => '' };
}

sub finish_one {
	my ($c, $status) = @_;
	my $ms = int((time() - $c->{start}) * 1000);
	my $e = $count{"$c->{kind} $status"} //= [ 0, 0 ];
	$e->[0]++;
	$e->[1] = $ms if $ms > $e->[1];
	$second{ int(time() - $t0) }++;
}

while (1) {
	my $now = time();
	# this process's share of RATE
	my $allowed = ($now - $t0) * $rate / $procs;
	start_one() while $now < $deadline && keys %conn < $concurrency && $started < $allowed;
	last if !%conn && $now >= $deadline;
	my ($rin, $win) = ('', '');
	for my $c (values %conn) {
		vec($c->{out} eq '' ? $rin : $win, fileno $c->{fh}, 1) = 1;
	}
	select(my $rout = $rin, my $wout = $win, undef, %conn ? 0.1 : 0.005);
	for my $fd (keys %conn) {
		my $c = $conn{$fd};
		my $done;
		if ($c->{out} ne '' && vec($wout, $fd, 1)) {
			my $w = syswrite($c->{fh}, $c->{out});
			if (defined $w) {
				substr($c->{out}, 0, $w, '');
			} elsif ($! != EAGAIN && $! != EWOULDBLOCK) {
				$done = 'refused';
			}
		} elsif ($c->{out} eq '' && vec($rout, $fd, 1)) {
			my $r = sysread($c->{fh}, $c->{in}, 16384, length $c->{in});
			if (defined $r && $r == 0) {
				# closed: the reply's status, or 444 for none
				$done = $c->{in} =~ m!^HTTP/1\.[01] (\d{3})! ? $1 : '444';
			} elsif (!defined $r && $! != EAGAIN && $! != EWOULDBLOCK) {
				$done = $c->{in} =~ m!^HTTP/1\.[01] (\d{3})! ? $1 : '444';
			}
		}
		$done //= 'hung' if time() - $c->{start} > $HUNG;
		next unless defined $done;
		finish_one($c, $done);
		close $c->{fh};
		delete $conn{$fd};
	}
}

open(my $out, '>', $summary) or die "$summary: $!\n";
print $out "$_ @{ $count{$_} }\n" for sort keys %count;
print $out "second $_ $second{$_}\n" for sort { $a <=> $b } keys %second;
close $out;
