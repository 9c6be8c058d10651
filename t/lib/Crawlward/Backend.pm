package Crawlward::Backend;

# A slow site for the browse-cap tests: an HTTP/1.0 backend that holds browse
# requests until the test releases them, and a way to count what reached it;
# one that takes as long as the path says, for the server-time figures; and
# one that answers with the request's crawlward headers, as they reached it.

use warnings;
use strict;

use Exporter qw/ import /;
use IO::Select;
use IO::Socket::INET;
use Socket qw/ CRLF /;
use Time::HiRes qw/ time sleep /;

our @EXPORT = qw/ held_backend timed_backend wait_backend crawlward_headers_backend /;

# number of $d/backend.log lines matching $re, waiting up to $secs for $n
sub wait_backend {
	my ($d, $re, $n, $secs) = @_;
	my $deadline = time() + $secs;
	my $count;

	while (1) {
		my $log = '';
		if (open(my $fh, '<', "$d/backend.log")) {
			local $/;
			$log = <$fh>;
		}
		$count = grep { $_ =~ $re } split /\n/, $log // '';
		last if $count >= $n || time() > $deadline;
		sleep(0.05);
	}

	return $count;
}

# HTTP/1.0 backend, one process: browse requests wait for $dir/release
# (at most $hold_max s), the rest are answered at once; the body names the
# URI.  Every request line is appended to $dir/backend.log on arrival.
sub held_backend {
	my ($port, $dir, $hold_max) = @_;

	my $server = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => "127.0.0.1:$port",
		Listen => 64,
		ReuseAddr => 1,
	)
		or die "Can't listen on 127.0.0.1:$port: $@\n";

	$server->blocking(0);

	my $sel = IO::Select->new($server);
	my %c;	# fileno => { s => socket, buf => '', uri => ..., since => t }

	# the test stops this daemon; should the test die without doing so,
	# the daemon follows its parent
	my $parent = getppid();

	while (getppid() == $parent) {
		for my $s ($sel->can_read(0.05)) {
			if ($s == $server) {
				while (my $n = $server->accept()) {
					$n->blocking(0);
					$sel->add($n);
					$c{fileno $n} = { s => $n, buf => '' };
				}
				next;
			}

			my $st = $c{fileno $s};
			my $got = sysread($s, $st->{buf}, 4096, length $st->{buf});

			if (!$got) {
				next if !defined $got && $!{EAGAIN};
				$sel->remove($s);
				delete $c{fileno $s};
				close $s;
				next;
			}

			next if defined $st->{uri};
			next unless $st->{buf} =~ /\x0d?\x0a\x0d?\x0a/;

			($st->{uri}) = $st->{buf} =~ m!^\S+ (\S+) HTTP/!;
			$st->{uri} //= '?';
			$st->{since} = time();

			if (open(my $fh, '>>', "$dir/backend.log")) {
				print $fh "$st->{uri}\n";
				close $fh;
			}
		}

		for my $st (values %c) {
			next unless defined $st->{uri};
			next if $st->{uri} =~ /browse/ && !-e "$dir/release"
				&& time() - $st->{since} < $hold_max;

			my $body = "backend: $st->{uri}\n";
			my $s = $st->{s};
			$s->blocking(1);
			print $s 'HTTP/1.0 200 OK' . CRLF
				. 'Content-Type: text/plain' . CRLF
				. 'Content-Length: ' . length($body) . CRLF
				. 'Connection: close' . CRLF
				. CRLF
				. $body;
			$sel->remove($s);
			delete $c{fileno $s};
			close $s;
		}
	}
}

# HTTP/1.0 backend on $port, one request at a time: each answered 200 with
# the body $body_of->($head) gives, $head being the request line and headers.
sub one_at_a_time {
	my ($port, $body_of) = @_;

	my $server = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalAddr => "127.0.0.1:$port",
		Listen => 64,
		ReuseAddr => 1,
	)
		or die "Can't listen on 127.0.0.1:$port: $@\n";

	my $parent = getppid();
	my $sel = IO::Select->new($server);

	while (getppid() == $parent) {
		next unless $sel->can_read(0.1);
		my $s = $server->accept() or next;
		my $buf = '';
		while ($buf !~ /\x0d?\x0a\x0d?\x0a/) {
			my $got = sysread($s, $buf, 4096, length $buf);
			last unless $got;
		}
		my ($head) = $buf =~ /^(.*?)\x0d?\x0a\x0d?\x0a/s;
		my $body = $body_of->($head // '');
		print $s 'HTTP/1.0 200 OK' . CRLF
			. 'Content-Type: text/plain' . CRLF
			. 'Content-Length: ' . length($body) . CRLF
			. 'Connection: close' . CRLF
			. CRLF
			. $body;
		close $s;
	}
}

# a path that starts /ms/N/ is answered after N milliseconds, any other at once
sub timed_backend {
	my ($port) = @_;
	one_at_a_time($port, sub {
		my ($uri) = $_[0] =~ m!^\S+ (\S+) HTTP/!;
		$uri //= '?';
		sleep($1 / 1000) if $uri =~ m!^/ms/(\d+)/!;
		return "backend: $uri\n";
	});
}

# the body is every request header line whose name holds "crawlward" (any
# case), as it arrived, one a line, in order; "none" for none
sub crawlward_headers_backend {
	my ($port) = @_;
	one_at_a_time($port, sub {
		my @lines = grep { /^[^:]*crawlward[^:]*:/i } split /\x0d?\x0a/, $_[0];
		return @lines ? join("\n", @lines) . "\n" : "none\n";
	});
}

1;
