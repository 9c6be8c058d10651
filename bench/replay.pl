#!/usr/bin/perl

# bench/replay's parts: the slow site, the traffic, the report and its chart.
#   perl bench/replay.pl backend PORT WORKERS LOG
#   perl bench/replay.pl load PORT SECONDS RESULTS flood|unloaded
#   perl bench/replay.pl report WORKERS SECONDS DIR
# Every socket is on loopback; every loop ends at its deadline.

use warnings;
use strict;

use IO::Socket::INET;
use POSIX qw/ floor /;
use Time::HiRes qw/ time sleep /;

# ordinary Chrome User-Agents, as on 12 Oct
my @CHROME = map { "Mozilla/5.0 ($_->[0]) AppleWebKit/537.36 (KHTML, like Gecko) "
	. "Chrome/$_->[1] Safari/537.36" }
	[ 'Windows NT 10.0; Win64; x64', '131.0.0.0' ],
	[ 'Windows NT 10.0; Win64; x64', '130.0.0.0' ],
	[ 'Macintosh; Intel Mac OS X 10_15_7', '131.0.0.0' ],
	[ 'X11; Linux x86_64', '129.0.0.0' ],
	[ 'Windows NT 10.0; Win64; x64', '128.0.0.0' ];
my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $SCRIPT = 'python-requests/2.31.0';
my @FACETS = qw/ subjects places genres levels names creators /;

# Who is who, by source address (nginx passes the client address to the
# site in X-Client-Addr; the report reads the access log's): the two floods
# get a /12 each, so that every request can come from an address of its own.
my @POPULATIONS = qw/ aug-flood oct-flood readers googlebot spoofed scripts /;
sub population {
	my ($addr) = @_;
	return 'googlebot' if $addr =~ /^127\.0\.2\.[0-7]$/;
	return 'readers' if $addr =~ /^127\.3\./;
	return 'spoofed' if $addr =~ /^127\.4\./;
	return 'scripts' if $addr =~ /^127\.5\./;
	my ($b) = $addr =~ /^127\.(\d+)\./;
	return 'aug-flood' if defined $b && $b >= 16 && $b < 32;
	return 'oct-flood' if defined $b && $b >= 32 && $b < 48;
	return 'other';
}

my $cmd = shift // '';
if ($cmd eq 'backend') { backend(@ARGV) }
elsif ($cmd eq 'load') { load(@ARGV) }
elsif ($cmd eq 'report') { report(@ARGV) }
else { die "usage: replay.pl backend|load|report ...\n" }

# The site: WORKERS processes, each answers one request at a time (a PHP-FPM
# pool); a browse page holds its worker 0.5 s, anything else 20 ms. Each
# answer is logged: population, start and end (epoch seconds), browse or not.
sub backend {
	my ($port, $workers, $log) = @_;
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
		open(my $out, '>>', $log) or die "$log: $!\n";
		while (getppid() == $parent) {
			my $c = $l->accept or next;
			local $/ = "\r\n\r\n";
			my $head = <$c> // '';
			my $start = time();
			my ($uri) = $head =~ m!^\S+ (\S+)!;
			$uri //= '/';
			my ($addr) = $head =~ /^X-Client-Addr: *(\S+)/mi;
			my $browse = $uri =~ m!/browse! ? 1 : 0;
			sleep($browse ? 0.5 : 0.02);
			print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
				. "Content-Length: 5\r\n\r\npage\n";
			close $c;
			syswrite $out, sprintf("%s %.4f %.4f %d\n",
				population($addr // ''), $start, time(), $browse);
		}
		exit 0;
	}
	1 while wait() != -1;
}

# One request: (status, milliseconds); status 444 when the connection closed
# without a reply, 0 when it could not be made or timed out.
sub request {
	my ($port, $from, $uri, $ua, $referer) = @_;
	my $start = time();
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
		LocalAddr => $from, Timeout => 15) or return (0, 0);
	my $req = "GET $uri HTTP/1.0\r\nHost: heratio.org\r\nUser-Agent: $ua\r\n";
	$req .= "Referer: $referer\r\n" if defined $referer;
	print $s "$req\r\n";
	my $reply = '';
	my $rin = '';
	vec($rin, fileno($s), 1) = 1;
	while (1) {
		# no request waits more than 15 s
		my $left = $start + 15 - time();
		last if $left <= 0 || !select(my $r = $rin, undef, undef, $left);
		my $n = sysread($s, $reply, 4096, length $reply);
		last unless $n;
	}
	close $s;
	my ($status) = $reply =~ m!^HTTP/1\.[01] (\d{3})!;
	return (0, floor((time() - $start) * 1000)) if !defined $status && time() - $start >= 15;
	return ($status // 444, floor((time() - $start) * 1000));
}

sub load {
	my ($port, $seconds, $results, $shape) = @_;
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
	# a client that sends one request at a time, at most one every PERIOD s
	my $paced = sub {
		my ($population, $period, $next_request) = @_;
		$spawn->($population, sub {
			my ($log) = @_;
			my $next = time() + rand($period);
			my $i = 0;
			while ($next < $deadline) {
				sleep($next - time()) if $next > time();
				$next += $period;
				$next = time() if $next < time();
				$log->(request($port, $next_request->($i++)));
			}
		});
	};

	if ($shape eq 'flood') {
		# 24 Aug: browse pages, one address per request (36,157 requests
		# from 31,722 addresses), nearly every URL new: 40 clients at up
		# to 2 requests a second each
		for my $k (0 .. 39) {
			$paced->('aug-flood', 0.5, sub {
				my ($i) = @_;
				my $n = $k * 25000 + $i;
				my $from = '127.' . (16 + int($n / 65000) % 16) . '.'
					. int($n / 250) % 250 . '.' . (1 + $n % 250);
				my $uri = (rand() < 0.7 ? '/glam' : '/actor') . '/browse?page='
					. int(rand(5000));
				$uri .= '&sort=' . (qw/ alpha date identifier /)[rand 3] if rand() < 0.3;
				return ($from, $uri, $CHROME[rand @CHROME]);
			});
		}
		# 12 Oct: ordinary Chrome User-Agents, about two requests per address
		# (120,979 from 63,682), most combining facets, 95% of those without
		# a Referer: 40 clients at up to 2 requests a second each
		for my $k (0 .. 39) {
			$paced->('oct-flood', 0.5, sub {
				my ($i) = @_;
				my $n = $k * 25000 + int($i / 2);
				my $from = '127.' . (32 + int($n / 65000) % 16) . '.'
					. int($n / 250) % 250 . '.' . (1 + $n % 250);
				my @f = @FACETS;
				my $nf = rand() < 0.8 ? 2 + int(rand(3)) : 1;
				my @q;
				for (1 .. $nf) {
					my $name = splice(@f, rand @f, 1);
					push @q, "$name=" . int(rand(900));
				}
				push @q, 'page=' . (1 + int(rand(50))) if rand() < 0.5;
				my $referer = $nf >= 2 && rand() < 0.95 ? undef
					: 'https://heratio.org/glam/browse';
				return ($from, '/glam/browse?' . join('&', @q),
					$CHROME[rand @CHROME], $referer);
			});
		}
	}
	# people: 20, each reading a record page every 1 to 3 s
	for my $k (1 .. 20) {
		$paced->('readers', 1 + rand(2), sub {
			return ("127.3.0.$k", '/record/' . int(rand(100000)), $CHROME[$k % @CHROME],
				'https://heratio.org/glam/browse');
		});
	}
	# verified Googlebot (its published range is 127.0.2.0/29 here): 8
	# addresses, 5 requests a second in all, record and browse pages
	for my $k (0 .. 7) {
		$paced->('googlebot', 1.6, sub {
			my $uri = rand() < 0.5 ? '/record/' . int(rand(100000))
				: '/glam/browse?page=' . int(rand(5000));
			return ("127.0.2.$k", $uri, $GOOGLEBOT);
		});
	}
	# Googlebot's User-Agent from elsewhere: 2 a second
	for my $k (1 .. 2) {
		$paced->('spoofed', 1, sub {
			my $uri = rand() < 0.5 ? '/record/' . int(rand(100000))
				: '/glam/browse?page=' . int(rand(5000));
			return ("127.4.0.$k", $uri, $GOOGLEBOT);
		});
	}
	# a script on the machine door, within its rate class (60 a minute)
	$paced->('scripts', 1.25, sub {
		return ('127.5.0.1', '/api/v1/records?page=' . int(rand(1000)), $SCRIPT);
	});
	waitpid($_, 0) for @kids;
}

sub percentile {
	my ($p, @v) = @_;
	return undef unless @v;
	@v = sort { $a <=> $b } @v;
	return $v[ int($p * $#v + 0.5) ];
}

sub slurp_lines {
	my ($file) = @_;
	open(my $fh, '<', $file) or return ();
	return map { [ split ] } <$fh>;
}

# the upstream's log: busy seconds per population, and the most workers busy
# at once with browse pages and in all
sub upstream {
	my ($file) = @_;
	my (%busy, @events, $first, $last);
	for my $l (slurp_lines($file)) {
		my ($pop, $start, $end, $browse) = @$l;
		next if $pop eq 'other';
		$busy{$pop} += $end - $start;
		push @events, [ $start, 1, $browse ], [ $end, -1, $browse ];
		$first = $start if !defined $first || $start < $first;
		$last = $end if !defined $last || $end > $last;
	}
	my ($now, $now_browse, $max, $max_browse) = (0, 0, 0, 0);
	# ends before starts at the same instant
	for my $e (sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] } @events) {
		$now += $e->[1];
		$now_browse += $e->[1] if $e->[2];
		$max = $now if $now > $max;
		$max_browse = $now_browse if $now_browse > $max_browse;
	}
	return { busy => \%busy, max => $max, max_browse => $max_browse,
		span => defined $first ? $last - $first : 0 };
}

# the access log's verdicts per population: { pop => { verdict => n } }
sub verdicts {
	my ($file) = @_;
	my %v;
	for my $l (slurp_lines($file)) {
		my ($addr, $status, $verdict) = @$l;
		$v{ population($addr) }{ $verdict // '-' }++;
	}
	return \%v;
}

sub report {
	my ($workers, $seconds, $dir) = @_;
	my @runs = qw/ unloaded none stock module /;
	my (%by, %up, %verdict, %series);
	for my $run (@runs) {
		for my $l (slurp_lines("$dir/$run.results")) {
			my ($pop, $status, $ms, $t) = @$l;
			my $b = $by{$run}{$pop} //= { n => 0, ms => [] };
			push @{ $b->{ms} }, $ms;
			my $class = $status =~ /^(200|429|444|503)$/ ? $status
				: $status =~ /^5/ ? '5xx' : $status eq '0' ? 'timeout' : 'other';
			$b->{$class}++;
			$b->{n}++;
			push @{ $series{$run}{$pop}[ int($t) ] }, $ms;
		}
		$up{$run} = upstream("$dir/$run.upstream");
		$verdict{$run} = verdicts("$dir/$run.access");
	}

	print "heratio.org's incidents replayed (bench/replay): $seconds s per run, "
		. "$workers upstream workers, a browse page holds one 0.5 s, "
		. "a record page 20 ms. \"unloaded\" is the module's configuration "
		. "without the two floods.\n\n";
	print "| run | population | requests | 200 | 429 | 444 | 503 | other 5xx | timeout | p50 ms | p99 ms | upstream time |\n";
	print "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
	my $pct = sub { sprintf '%.1f%%', 100 * $_[0] };
	for my $run (@runs) {
		my $capacity = $workers * ($up{$run}{span} || 1);
		for my $pop (@POPULATIONS) {
			my $b = $by{$run}{$pop} or next;
			printf "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n",
				$run, $pop, $b->{n}, map({ $b->{$_} // 0 }
				qw/ 200 429 444 503 5xx timeout /),
				percentile(0.5, @{ $b->{ms} }), percentile(0.99, @{ $b->{ms} }),
				$pct->(($up{$run}{busy}{$pop} // 0) / $capacity);
		}
	}
	print "\nUpstream time is the share of the pool's worker-seconds (workers x "
		. "the run's length) each population held. Busy workers at once:\n\n";
	print "| run | most workers busy | most busy with browse pages | pool busy in all |\n|---|---|---|---|\n";
	for my $run (@runs) {
		my $capacity = $workers * ($up{$run}{span} || 1);
		my $all = 0;
		$all += $_ for values %{ $up{$run}{busy} };
		printf "| %s | %d of %d | %d of %d | %s |\n", $run, $up{$run}{max}, $workers,
			$up{$run}{max_browse}, $workers, $pct->($all / $capacity);
	}

	# what the module run must show
	my @checks;
	my $check = sub {
		my ($ok, $what) = @_;
		push @checks, [ $ok, $what ];
	};
	my $p99 = sub { percentile(0.99, @{ $by{$_[0]}{$_[1]}{ms} || [] }) // 0 };
	for my $run (qw/ stock module /) {
		my $readers = $p99->($run, 'readers');
		my $base = $p99->('unloaded', 'readers');
		$check->($readers <= 2 * $base, "$run: people reading record pages keep their "
			. "latency: p99 $readers ms, unloaded p99 $base ms (at most 2 times: "
			. 2 * $base . " ms)");
		my $g = $by{$run}{googlebot} || {};
		my $bad = ($g->{429} // 0) + ($g->{444} // 0) + ($g->{503} // 0)
			+ ($g->{'5xx'} // 0) + ($g->{timeout} // 0) + ($g->{other} // 0);
		$check->($g->{n} && !$bad, "$run: the verified crawler never gets a 429, "
			. "444 or 5xx: " . ($g->{200} // 0) . " of " . ($g->{n} // 0) . " answered 200");
		my $gv = $verdict{$run}{googlebot} || {};
		$check->(($gv->{verified} // 0) == ($g->{n} // -1), "$run: every request of the "
			. "verified crawler was verified: " . ($gv->{verified} // 0) . " of " . ($g->{n} // 0));
		my $sv = $verdict{$run}{spoofed} || {};
		my $s = $by{$run}{spoofed} || {};
		my $sv_text = join(', ', map { "$_ $sv->{$_}" } sort keys %$sv);
		$check->(!$sv->{verified} && !$s->{200}, "$run: the spoofed crawler never "
			. "passes as verified (its verdicts: $sv_text; " . ($s->{444} // 0)
			. " of " . ($s->{n} // 0) . " refused with 444)");
		$check->($up{$run}{max_browse} < $workers, "$run: browse never saturates the "
			. "upstream: at most $up{$run}{max_browse} of $workers workers on browse pages at once");
	}
	print "\nChecks:\n\n";
	printf "- %s %s\n", $_->[0] ? 'PASS' : 'FAIL', $_->[1] for @checks;

	chart("$dir/chart.svg", \@runs, \%series, $seconds);
	exit((grep { !$_->[0] } @checks) ? 1 : 0);
}

# latency over time: one panel per run, a line per population (the p99 of
# each second's requests; the floods' p50), on a log scale from 1 ms to 20 s
sub chart {
	my ($file, $runs, $series, $seconds) = @_;
	my @shown = ([ 'readers', 'p99', '#1f77b4' ], [ 'googlebot', 'p99', '#2ca02c' ],
		[ 'aug-flood', 'p50', '#d62728' ], [ 'oct-flood', 'p50', '#ff7f0e' ]);
	my ($w, $ph, $left, $top, $gap) = (860, 170, 70, 50, 40);
	my $pw = $w - $left - 20;
	my $h = $top + @$runs * ($ph + $gap) + 30;
	my ($lo, $hi) = (log(1), log(20000));
	my $y = sub { my ($ms) = @_; $ms = 1 if $ms < 1; $ms = 20000 if $ms > 20000;
		return $ph - ($ph * (log($ms) - $lo) / ($hi - $lo)) };
	my $x = sub { $left + $pw * $_[0] / $seconds };
	my $svg = qq{<svg xmlns="http://www.w3.org/2000/svg" width="$w" height="$h" }
		. qq{viewBox="0 0 $w $h" font-family="sans-serif" font-size="12">\n}
		. qq{<rect width="$w" height="$h" fill="white"/>\n}
		. qq{<text x="$left" y="20" font-size="14">Latency over time, heratio.org's incidents }
		. qq{replayed (bench/replay): p99 per second for people and Googlebot, p50 for the floods</text>\n};
	my $legend = $left;
	for my $s (@shown) {
		$svg .= qq{<line x1="$legend" y1="32" x2="${\ ($legend + 20)}" y2="32" stroke="$s->[2]" stroke-width="2"/>}
			. qq{<text x="${\ ($legend + 25)}" y="36">$s->[0] $s->[1]</text>\n};
		$legend += 150;
	}
	my $py = $top + 10;
	for my $run (@$runs) {
		$svg .= qq{<g transform="translate(0,$py)">\n}
			. qq{<rect x="$left" y="0" width="$pw" height="$ph" fill="none" stroke="#999"/>\n}
			. qq{<text x="$left" y="-6" font-weight="bold">$run</text>\n};
		for my $ms (1, 10, 100, 1000, 10000) {
			my $yy = sprintf '%.1f', $y->($ms);
			my $label = $ms >= 1000 ? ($ms / 1000) . ' s' : "$ms ms";
			$svg .= qq{<line x1="$left" y1="$yy" x2="${\ ($left + $pw)}" y2="$yy" stroke="#eee"/>}
				. qq{<text x="${\ ($left - 6)}" y="${\ ($yy + 4)}" text-anchor="end">$label</text>\n};
		}
		for my $s (@shown) {
			my ($pop, $p, $color) = @$s;
			my $buckets = $series->{$run}{$pop} or next;
			my @pts;
			for my $sec (0 .. ($#$buckets < $seconds - 1 ? $#$buckets : $seconds - 1)) {
				my $v = $buckets->[$sec] or next;
				my $q = percentile($p eq 'p99' ? 0.99 : 0.5, @$v);
				push @pts, sprintf('%.1f,%.1f', $x->($sec + 0.5), $y->($q));
			}
			$svg .= qq{<polyline fill="none" stroke="$color" stroke-width="1.5" points="@pts"/>\n} if @pts;
		}
		$svg .= "</g>\n";
		$py += $ph + $gap;
	}
	my $axis = $py - $gap + 15;
	for (my $s = 0; $s <= $seconds; $s += 10) {
		$svg .= sprintf qq{<text x="%.1f" y="%d" text-anchor="middle">%d s</text>\n}, $x->($s), $axis, $s;
	}
	$svg .= "</svg>\n";
	open(my $fh, '>', $file) or die "$file: $!\n";
	print $fh $svg;
}
