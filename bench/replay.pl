#!/usr/bin/perl

# bench/replay's parts: the slow site, the traffic, the report.
#   perl bench/replay.pl backend PORT WORKERS
#   perl bench/replay.pl load PORT SECONDS RESULTS-FILE
#   perl bench/replay.pl report SECONDS NONE STOCK MODULE
# Every socket is on loopback; every loop ends at its deadline.

use warnings;
use strict;

use IO::Socket::INET;
use POSIX qw/ floor /;
use Time::HiRes qw/ time sleep /;

my $CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 '
	. '(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $SCRIPT = 'python-requests/2.31.0';
my @POPULATIONS = qw/ flood readers googlebot spoofed scripts /;

my $cmd = shift // '';
if ($cmd eq 'backend') { backend(@ARGV) }
elsif ($cmd eq 'load') { load(@ARGV) }
elsif ($cmd eq 'report') { report(@ARGV) }
else { die "usage: replay.pl backend|load|report ...\n" }

# The site: WORKERS processes, each answers one request at a time (a PHP-FPM
# pool); a browse page holds its worker 0.5 s, anything else 20 ms.
sub backend {
	my ($port, $workers) = @_;
	my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1:$port",
		Listen => 1024, ReuseAddr => 1) or die "listen: $@\n";
	my $parent = $$;
	my @kids;
	$SIG{TERM} = sub { kill 'TERM', @kids; exit 0 };
	for (1 .. $workers) {
		my $pid = fork;
		die "fork: $!\n" unless defined $pid;
		if ($pid) {
			push @kids, $pid;
			next;
		}
		$SIG{TERM} = 'DEFAULT';
		while (getppid() == $parent) {
			my $c = $l->accept or next;
			local $/ = "\r\n\r\n";
			my $head = <$c> // '';
			my ($uri) = $head =~ m!^\S+ (\S+)!;
			$uri //= '/';
			sleep($uri =~ m!/browse! ? 0.5 : 0.02);
			print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
				. "Content-Length: 5\r\n\r\npage\n";
			close $c;
		}
		exit 0;
	}
	1 while wait() != -1;
}

# One request: (status, milliseconds); status 444 when the connection closed
# without a reply, 0 when it could not be made.
sub request {
	my ($port, $from, $uri, $ua, $referer) = @_;
	my $start = time();
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
		LocalAddr => $from, Timeout => 15) or return (0, 0);
	$s->timeout(15);
	my $req = "GET $uri HTTP/1.0\r\nHost: heratio.org\r\nUser-Agent: $ua\r\n";
	$req .= "Referer: $referer\r\n" if defined $referer;
	print $s "$req\r\n";
	my $reply = '';
	while (1) {
		my $n = sysread($s, $reply, 4096, length $reply);
		last unless $n;
	}
	close $s;
	my ($status) = $reply =~ m!^HTTP/1\.[01] (\d{3})!;
	return ($status // 444, floor((time() - $start) * 1000));
}

sub load {
	my ($port, $seconds, $results) = @_;
	my $deadline = time() + $seconds;
	my $t0 = time();
	my @kids;
	my $spawn = sub {
		my ($population, $body) = @_;
		my $pid = fork;
		die "fork: $!\n" unless defined $pid;
		if ($pid == 0) {
			srand($$);
			open(my $out, '>>', $results) or die "$results: $!\n";
			$out->autoflush(1);
			my $log = sub {
				my ($status, $ms) = @_;
				syswrite $out, sprintf("%s %s %d %.3f\n",
					$population, $status, $ms, time() - $t0);
			};
			$body->($log);
			exit 0;
		}
		push @kids, $pid;
	};

	# the flood: a new address for every request; half shaped like
	# 24 Aug (plain browse pages), half like 12 Oct (95% two facets
	# without a Referer)
	for my $k (0 .. 47) {
		$spawn->('flood', sub {
			my ($log) = @_;
			my $i = 0;
			while (time() < $deadline) {
				$i++;
				my $n = $k * 5000 + $i;
				my $from = '127.1.' . int($n / 250) % 250 . '.' . (1 + $n % 250);
				my $uri;
				if (rand() < 0.5) {
					$uri = (rand() < 0.5 ? '/glam' : '/actor')
						. '/browse?page=' . int(rand(5000));
				} elsif (rand() < 0.95) {
					$uri = '/glam/browse?subjects=' . int(rand(900))
						. '&places=' . int(rand(900));
				} else {
					$uri = '/glam/browse?subjects=' . int(rand(900));
				}
				$log->(request($port, $from, $uri, $CHROME));
			}
		});
	}
	# people: 20, each reading a record page about every 2 s
	for my $k (1 .. 20) {
		$spawn->('readers', sub {
			my ($log) = @_;
			my $next = time() + rand(2);
			while ($next < $deadline) {
				sleep($next - time()) if $next > time();
				$next += 1 + rand(2);
				$log->(request($port, "127.3.0.$k",
					'/record/' . int(rand(100000)), $CHROME));
			}
		});
	}
	# verified Googlebot: 8 addresses, 5 requests a second in all
	for my $k (0 .. 7) {
		$spawn->('googlebot', sub {
			my ($log) = @_;
			my $next = time() + rand(1.6);
			while ($next < $deadline) {
				sleep($next - time()) if $next > time();
				$next += 1.6;
				my $uri = rand() < 0.5 ? '/record/' . int(rand(100000))
					: '/glam/browse?page=' . int(rand(5000));
				$log->(request($port, "127.0.2.$k", $uri, $GOOGLEBOT));
			}
		});
	}
	for my $k (1 .. 2) {
		$spawn->('spoofed', sub {
			my ($log) = @_;
			my $next = time();
			while ($next < $deadline) {
				sleep($next - time()) if $next > time();
				$next += 1;
				$log->(request($port, "127.4.0.$k",
					'/record/' . int(rand(100000)), $GOOGLEBOT));
			}
		});
	}
	$spawn->('scripts', sub {
		my ($log) = @_;
		my $next = time();
		while ($next < $deadline) {
			sleep($next - time()) if $next > time();
			$next += 1.25;
			$log->(request($port, '127.5.0.1',
				'/api/v1/records?page=' . int(rand(1000)), $SCRIPT));
		}
	});
	waitpid($_, 0) for @kids;
}

sub percentile {
	my ($p, @v) = @_;
	return '-' unless @v;
	@v = sort { $a <=> $b } @v;
	return $v[ int($p * $#v + 0.5) ];
}

sub report {
	my ($seconds, %file);
	($seconds, @file{qw/ none stock module /}) = @_;
	print "Seed 000's incidents replayed for $seconds s each (bench/replay): "
		. "25 upstream workers, a browse page 0.5 s of one.\n\n";
	print "| run | population | requests | 200 | 429 | 444 | 503 | other |"
		. " p50 ms | p99 ms |\n";
	print "|---|---|---|---|---|---|---|---|---|---|\n";
	my %verdict;
	for my $mode (qw/ none stock module /) {
		my %by;
		open(my $fh, '<', $file{$mode}) or die "$file{$mode}: $!\n";
		while (<$fh>) {
			my ($pop, $status, $ms) = split;
			push @{ $by{$pop}{ms} }, $ms;
			my $class = $status =~ /^(200|429|444|503)$/ ? $status : 'other';
			$by{$pop}{$class}++;
			$by{$pop}{n}++;
		}
		for my $pop (@POPULATIONS) {
			my $b = $by{$pop} || {};
			printf "| %s | %s | %d | %d | %d | %d | %d | %d | %s | %s |\n",
				$mode, $pop, $b->{n} // 0, map({ $b->{$_} // 0 }
				qw/ 200 429 444 503 other /),
				percentile(0.5, @{ $b->{ms} || [] }),
				percentile(0.99, @{ $b->{ms} || [] });
		}
		my $g = $by{googlebot} || {};
		my $s = $by{scripts} || {};
		$verdict{$mode} = sprintf('verified Googlebot: %d of %d answered 200; '
			. 'scripts on /api/v1/: %d of %d answered 200',
			$g->{200} // 0, $g->{n} // 0, $s->{200} // 0, $s->{n} // 0);
	}
	print "\n";
	print "- $_: $verdict{$_}\n" for qw/ none stock module /;
}
