package Crawlward::DNS;

# A small DNS server (and client) for crawlward's nginx tests: answers PTR,
# A, AAAA (and CNAME, NS, TXT) from a table the test gives, logs every query
# to a file the test reads, and can be told per name to stay silent, fail
# or answer late.  The table can be rewritten while the server runs.  Core
# Perl only; works with crawlward's t/lib/Test/Nginx.pm and with
# nginx-tests' lib/Test/Nginx.pm (it only uses run_daemon() and testdir()).
# See the POD at the end of this file.

use warnings;
use strict;

use base qw/ Exporter /;

our @EXPORT_OK = qw/
	reverse_name query query_raw make_query parse_response wait_dns
	write_records read_records queries query_count
/;
our %EXPORT_TAGS = (all => \@EXPORT_OK);

use Errno qw/ EAGAIN EINTR EWOULDBLOCK /;
use IO::Select;
use IO::Socket::INET;
use POSIX qw/ _exit /;
use Scalar::Util qw/ blessed /;
use Socket qw/ AF_INET AF_INET6 inet_ntop inet_pton /;
use Time::HiRes qw//;

my %TYPE = (
	A => 1, NS => 2, CNAME => 5, SOA => 6, PTR => 12, MX => 15, TXT => 16,
	AAAA => 28, SRV => 33, OPT => 41, ANY => 255,
);
my %TYPE_NAME = reverse %TYPE;

# the types a records table may hold, in the order answers list them
my @SERVED = qw/ A AAAA PTR CNAME NS TXT /;
my %SERVED = map { $_ => 1 } @SERVED;

my %RCODE = (
	NOERROR => 0, FORMERR => 1, SERVFAIL => 2, NXDOMAIN => 3,
	NOTIMP => 4, REFUSED => 5,
);
my %RCODE_NAME = reverse %RCODE;

my @OPTIONS = qw/ ttl delay silent servfail refused rcode /;

my $TICK = 0.5;		# seconds between checks for the parent / SIGTERM
my $MAX_TCP = 64;	# TCP connections served at once
my $TCP_IDLE = 10;	# seconds before an idle TCP connection is closed
my $MAX_HOPS = 8;	# CNAME chain followed inside the table

sub _time { Time::HiRes::time() }

###############################################################################
# names and types

sub type_name {
	my ($code) = @_;
	return $TYPE_NAME{$code} // "TYPE$code";
}

sub type_code {
	my ($type) = @_;
	die "Crawlward::DNS: no query type\n" unless defined $type;
	return $type if $type =~ /^\d+$/ && $type < 65536;
	my $t = uc $type;
	return $TYPE{$t} if $TYPE{$t};
	return $1 if $t =~ /^TYPE(\d+)$/ && $1 < 65536;
	die "Crawlward::DNS: unknown query type $type\n";
}

sub rcode_name {
	my ($code) = @_;
	return $RCODE_NAME{$code} // "RCODE$code";
}

# A table name: lower case, no trailing dot, labels of 1-63 octets.
sub _norm_name {
	my ($name, $what) = @_;
	$what = defined $what ? "$what: " : '';

	die "Crawlward::DNS: ${what}empty name\n"
		unless defined $name && length $name;
	die "Crawlward::DNS: ${what}name '$name' has blanks or control "
		. "characters\n" if $name =~ /[\x00-\x20\x7f]/;

	my $n = lc $name;
	$n =~ s/\.\z//;

	die "Crawlward::DNS: ${what}name '$name' is the root\n"
		unless length $n;
	die "Crawlward::DNS: ${what}name '$name' is longer than 253\n"
		if length $n > 253;
	for my $label (split /\./, $n, -1) {
		die "Crawlward::DNS: ${what}name '$name' has an empty or "
			. "too long label\n"
			if length $label < 1 || length $label > 63;
	}

	return $n;
}

# 'crawl.example.com' -> wire format, uncompressed
sub _encode_name {
	my ($name) = @_;
	$name =~ s/\.\z//;
	return "\0" unless length $name;
	return _encode_labels([ split /\./, $name, -1 ]);
}

sub _encode_labels {
	my ($labels) = @_;
	return join('', map { chr(length $_) . $_ } @$labels) . "\0";
}

# Reads a name at $off, following compression pointers anywhere inside
# the packet.  Returns (\@labels, offset after the name); dies on a name
# that runs past the packet, loops, is too long or uses a label type
# other than 00 and 11.
sub _parse_name {
	my ($buf, $off) = @_;
	my $len = length $buf;
	my (@labels, $end);
	my ($hops, $wire) = (0, 1);

	while (1) {
		die "name runs past the packet\n" if $off >= $len;
		my $c = ord substr($buf, $off, 1);

		if ($c == 0) {
			$end = $off + 1 unless defined $end;
			last;
		}

		if (($c & 0xc0) == 0xc0) {
			die "truncated compression pointer\n" if $off + 1 >= $len;
			die "compression pointer loop\n" if ++$hops > 64;
			$end = $off + 2 unless defined $end;
			$off = unpack('n', substr($buf, $off, 2)) & 0x3fff;
			next;
		}

		die "unknown label type\n" if $c & 0xc0;
		die "label runs past the packet\n" if $off + 1 + $c > $len;

		push @labels, substr($buf, $off + 1, $c);
		$wire += 1 + $c;
		die "name longer than 255 octets\n" if $wire > 255;
		$off += 1 + $c;
	}

	return (\@labels, $end);
}

# a name as text: labels joined by dots, odd octets as \DDD (as dig does)
sub _name_text {
	my ($labels) = @_;
	return '.' unless @$labels;
	return join '.', map {
		(my $l = $_) =~ s/([^\x21-\x7e]|[.\\])/sprintf('\\%03d', ord $1)/ge;
		$l;
	} @$labels;
}

# reverse_name('127.0.0.2') -> '2.0.0.127.in-addr.arpa'
# reverse_name('::1') -> '1.0.0. ... .0.ip6.arpa' (32 nibbles)
sub reverse_name {
	my ($addr) = @_;
	die "Crawlward::DNS: reverse_name: no address\n" unless defined $addr;

	if ($addr =~ /:/) {
		my $bin = inet_pton(AF_INET6, $addr)
			or die "Crawlward::DNS: reverse_name: bad IPv6 "
				. "address '$addr'\n";
		return join('.', reverse split //, unpack('H32', $bin))
			. '.ip6.arpa';
	}

	die "Crawlward::DNS: reverse_name: bad IPv4 address '$addr'\n"
		unless $addr =~ /^\d{1,3}(?:\.\d{1,3}){3}\z/
			&& inet_pton(AF_INET, $addr);

	return join('.', reverse split /\./, $addr) . '.in-addr.arpa';
}

###############################################################################
# records tables

# validates one value of a record type; returns it as the table keeps it
sub _norm_value {
	my ($type, $v, $name) = @_;
	my $what = "$name $type";

	die "Crawlward::DNS: $what: undefined value\n" unless defined $v;
	die "Crawlward::DNS: $what: '$v' has a line break or tab\n"
		if $v =~ /[\r\n\t]/;

	if ($type eq 'A') {
		die "Crawlward::DNS: $what: bad IPv4 address '$v'\n"
			unless $v =~ /^\d{1,3}(?:\.\d{1,3}){3}\z/
				&& inet_pton(AF_INET, $v);
	} elsif ($type eq 'AAAA') {
		die "Crawlward::DNS: $what: bad IPv6 address '$v'\n"
			unless $v =~ /:/ && inet_pton(AF_INET6, $v);
	} elsif ($type eq 'TXT') {
		# any text
	} else {
		_norm_name($v, $what);
		$v =~ s/\.\z//;
	}

	return $v;
}

# \%records as tests write them -> the table the server looks names up in:
# lc(name) => { name, rr => { TYPE => [ values ] }, ttl, delay, silent,
# rcode }.  Dies on anything it does not understand.
sub _normalize {
	my ($records) = @_;
	my %table;

	die "Crawlward::DNS: records must be a hash reference\n"
		unless ref $records eq 'HASH';

	for my $name (sort keys %$records) {
		my $key = _norm_name($name, 'records');
		die "Crawlward::DNS: records: '$name' is given twice "
			. "(names are case-insensitive)\n" if $table{$key};

		my $spec = $records->{$name} // {};
		die "Crawlward::DNS: records: '$name' must map to a hash "
			. "reference\n" unless ref $spec eq 'HASH';

		(my $shown = $name) =~ s/\.\z//;
		my $e = { name => $shown, rr => {}, delay => 0, silent => 0 };

		for my $k (sort keys %$spec) {
			my $v = $spec->{$k};

			if ($SERVED{$k}) {
				my @v = ref $v eq 'ARRAY' ? @$v
					: defined $v ? ($v) : ();
				push @{ $e->{rr}{$k} },
					map { _norm_value($k, $_, $shown) } @v;

			} elsif ($k eq 'ttl') {
				die "Crawlward::DNS: $shown: bad ttl\n"
					unless defined $v && $v =~ /^\d+\z/
						&& $v < 2**31;
				$e->{ttl} = 0 + $v;

			} elsif ($k eq 'delay') {
				die "Crawlward::DNS: $shown: bad delay\n"
					unless defined $v
						&& $v =~ /^\d+(?:\.\d*)?\z/;
				$e->{delay} = 0 + $v;

			} elsif ($k eq 'silent') {
				$e->{silent} = $v ? 1 : 0;

			} elsif ($k eq 'servfail' || $k eq 'refused') {
				$e->{rcode} = $RCODE{ uc $k } if $v;

			} elsif ($k eq 'rcode') {
				my $c = defined $v && $v =~ /^\d+\z/ ? $v
					: defined $v ? $RCODE{ uc $v } : undef;
				die "Crawlward::DNS: $shown: bad rcode\n"
					unless defined $c && $c < 16;
				$e->{rcode} = $c ? 0 + $c : undef;

			} else {
				die "Crawlward::DNS: $shown: unknown key '$k' "
					. "(types: @SERVED; options: @OPTIONS)\n";
			}
		}

		$table{$key} = $e;
	}

	return \%table;
}

# Writes \%records to $file (atomically: a temporary file, then rename),
# after checking it as the server will.  A server started with
# records_file => $file answers from the new table from its next query on.
sub write_records {
	my ($file, $records) = @_;
	my $table = _normalize($records);
	my $s = "# Crawlward::DNS records: name TAB type-or-option TAB value\n";

	for my $key (sort keys %$table) {
		my $e = $table->{$key};
		my $n = $e->{name};

		$s .= "$n\n";
		for my $type (@SERVED) {
			$s .= "$n\t$type\t$_\n" for @{ $e->{rr}{$type} || [] };
		}
		$s .= "$n\tttl\t$e->{ttl}\n" if defined $e->{ttl};
		$s .= "$n\tdelay\t$e->{delay}\n" if $e->{delay};
		$s .= "$n\tsilent\t1\n" if $e->{silent};
		$s .= "$n\trcode\t$e->{rcode}\n" if defined $e->{rcode};
	}

	my $tmp = "$file.tmp.$$";
	open(my $fh, '>', $tmp)
		or die "Crawlward::DNS: can't create $tmp: $!\n";
	binmode $fh;
	print {$fh} $s;
	close($fh) or die "Crawlward::DNS: can't write $tmp: $!\n";
	rename($tmp, $file)
		or die "Crawlward::DNS: can't rename $tmp to $file: $!\n";

	return 1;
}

# Reads a file written by write_records() back into a \%records hash.
sub read_records {
	my ($file) = @_;
	my %records;

	open(my $fh, '<', $file)
		or die "Crawlward::DNS: can't open $file: $!\n";
	binmode $fh;

	while (my $line = <$fh>) {
		$line =~ s/\r?\n\z//;
		next if $line =~ /^\s*(?:#|\z)/;

		my ($name, $k, $v) = split /\t/, $line, 3;
		$records{$name} //= {};
		next unless defined $k;

		die "Crawlward::DNS: $file: line $.: no value\n"
			unless defined $v;

		if ($SERVED{$k}) {
			push @{ $records{$name}{$k} }, $v;
		} else {
			$records{$name}{$k} = $v;
		}
	}

	close $fh;
	return \%records;
}

###############################################################################
# the server

# Daemon body for $t->run_daemon(\&Crawlward::DNS::run, %options): serves
# until SIGTERM or until its parent process is gone, then _exit()s (0, or
# 1 after printing why it could not serve), so it never returns into a
# forked copy of the test.
sub run {
	my (@args) = @_;
	my $ok = eval { serve(@args); 1 };
	print STDERR "Crawlward::DNS: $@" unless $ok;
	_exit($ok ? 0 : 1);
}

# The server loop itself; returns after SIGTERM or when the parent is gone.
sub serve {
	my (%o) = @_;

	my $port = $o{port};
	die "serve: port is required\n"
		unless defined $port && $port =~ /^\d+\z/;

	my $self = bless {
		port => $port,
		ttl => $o{ttl} // 300,
		log => $o{log},
		file => $o{records_file},
		sig => '',
		table => _normalize($o{records} || {}),
		pending => [],
		verbose => $o{verbose} // $ENV{TEST_NGINX_VERBOSE},
	}, __PACKAGE__;

	die "serve: bad ttl\n" unless $self->{ttl} =~ /^\d+\z/;

	# a broken table at start is an error of the test: die loudly
	if (defined $self->{file} && -e $self->{file}) {
		$self->{table} = _normalize(read_records($self->{file}));
		$self->{sig} = _file_sig($self->{file});
	}

	my $udp = IO::Socket::INET->new(
		Proto => 'udp',
		LocalAddr => "127.0.0.1:$port",
	) or die "can't bind UDP 127.0.0.1:$port: $@\n";

	my $tcp;
	if (ref $o{tcp}) {
		# a socket bound by the harness, e.g.
		# port(8053, udp => 1, socket => 1)
		$tcp = $o{tcp};
		listen($tcp, 16) or die "can't listen on the TCP socket: $!\n";
	} elsif ($o{tcp}) {
		$tcp = IO::Socket::INET->new(
			Proto => 'tcp',
			LocalAddr => "127.0.0.1:$port",
			Listen => 16,
			ReuseAddr => 1,
		) or die "can't listen on TCP 127.0.0.1:$port: $@\n";
	}
	$tcp->blocking(0) if $tcp;

	# ready: the log file exists (for $t->waitforfile($log))
	if (defined $self->{log}) {
		open(my $fh, '>>', $self->{log})
			or die "can't open $self->{log}: $!\n";
		close $fh;
	}

	my $stop = 0;
	local $SIG{TERM} = sub { $stop = 1 };
	local $SIG{PIPE} = 'IGNORE';

	my $ppid = getppid();
	my $sel = IO::Select->new($udp, $tcp ? ($tcp) : ());
	my %conn;		# fileno => { sock, buf, last, closed }

	my $drop = sub {
		my ($c) = @_;
		return if $c->{closed};
		$c->{closed} = 1;
		delete $conn{ fileno $c->{sock} };
		$sel->remove($c->{sock});
		close $c->{sock};
	};

	while (!$stop) {
		last if getppid() != $ppid;

		my $now = _time();

		# answers whose delay is over
		my $pending = $self->{pending};
		while (@$pending && $pending->[0]{due} <= $now) {
			my $p = shift @$pending;
			$p->{reply}->($p->{data});
		}

		# idle TCP clients
		for my $c (values %conn) {
			$drop->($c) if $now - $c->{last} > $TCP_IDLE;
		}

		my $wait = $TICK;
		if (@$pending) {
			my $next = $pending->[0]{due} - $now;
			$wait = $next < 0 ? 0 : $next if $next < $wait;
		}

		for my $fh ($sel->can_read($wait)) {
			if ($fh == $udp) {
				my $pkt = '';
				my $peer = $udp->recv($pkt, 65535, 0);
				next unless defined $peer && length $peer;
				$self->_dispatch($pkt, sub {
					$udp->send($_[0], 0, $peer);
				});

			} elsif ($tcp && $fh == $tcp) {
				my $s = $tcp->accept() or next;
				if (keys %conn >= $MAX_TCP) {
					close $s;
					next;
				}
				$s->blocking(0);
				$conn{ fileno $s } = {
					sock => $s, buf => '', last => _time(),
				};
				$sel->add($s);

			} else {
				my $c = $conn{ fileno $fh } or next;
				my $n = sysread($fh, $c->{buf}, 65536,
					length $c->{buf});

				if (!defined $n) {
					next if $! == EINTR || $! == EAGAIN
						|| $! == EWOULDBLOCK;
					$drop->($c);
					next;
				}

				$c->{last} = _time();

				while (length $c->{buf} >= 2) {
					my $len = unpack 'n', $c->{buf};
					last if length $c->{buf} < 2 + $len;
					my $msg = substr($c->{buf}, 2, $len);
					substr($c->{buf}, 0, 2 + $len) = '';

					$self->_dispatch($msg, sub {
						_tcp_write($c, $_[0])
							or $drop->($c);
					});
				}

				$drop->($c) if $n == 0 && !$c->{closed};
			}
		}
	}

	$drop->($_) for values %conn;
	close $udp;
	close $tcp if $tcp;

	return 1;
}

sub _tcp_write {
	my ($c, $msg) = @_;
	return 0 if $c->{closed};

	my $data = pack('n', length $msg) . $msg;
	my $deadline = _time() + 1;

	while (length $data) {
		my $n = syswrite($c->{sock}, $data);
		if (defined $n) {
			substr($data, 0, $n) = '';
			next;
		}
		return 0 unless $! == EINTR || $! == EAGAIN
			|| $! == EWOULDBLOCK;
		return 0 if _time() > $deadline;
		my $w = '';
		vec($w, fileno $c->{sock}, 1) = 1;
		select(undef, $w, undef, 0.05);
	}

	return 1;
}

sub _file_sig {
	my ($file) = @_;
	my @st = Time::HiRes::stat($file);
	return @st ? join(':', @st[0, 1, 7, 9]) : '';
}

# reload the records file if it changed (device, inode, size or mtime)
sub _maybe_reload {
	my ($self) = @_;
	return unless defined $self->{file};

	my $sig = _file_sig($self->{file});
	return if $sig eq $self->{sig};
	$self->{sig} = $sig;
	return unless length $sig;	# removed: keep the table

	my $table = eval { _normalize(read_records($self->{file})) };
	if (!$table) {
		print STDERR "Crawlward::DNS: $self->{file} not reloaded, "
			. "keeping the old table: $@";
		return;
	}

	$self->{table} = $table;
}

sub _log {
	my ($self, $line) = @_;
	return unless defined $self->{log};

	open(my $fh, '>>', $self->{log}) or return;
	syswrite($fh, "$line\n");
	close $fh;
}

# one packet in: answer it now, later or never
sub _dispatch {
	my ($self, $pkt, $reply) = @_;

	my ($data, $delay, $log) = eval { $self->_respond($pkt) };

	if ($@) {
		print STDERR "Crawlward::DNS: skipped a malformed packet: $@"
			if $self->{verbose};
		return;
	}

	$self->_log($log) if defined $log;
	return unless defined $data;

	if (!$delay) {
		$reply->($data);
		return;
	}

	my $p = $self->{pending};
	push @$p, { due => _time() + $delay, data => $data, reply => $reply };
	@$p = sort { $a->{due} <=> $b->{due} } @$p;
}

# Returns (reply or undef, delay, log line or undef); an empty list for
# packets that get no answer and no log line; dies on a malformed one.
sub _respond {
	my ($self, $pkt) = @_;

	return () if length $pkt < 12;

	my ($id, $flags, $qdcount) = unpack 'n3', $pkt;
	return () if $flags & 0x8000;		# a response, not a query

	my $opcode = ($flags >> 11) & 0xf;
	my $rd = $flags & 0x0100;

	# not a QUERY (wait_dns() probes with opcode STATUS): NOTIMP, no log
	return (pack('n6', $id, 0x8000 | ($opcode << 11) | $rd
		| $RCODE{NOTIMP}, 0, 0, 0, 0), 0, undef) if $opcode != 0;

	return () if $qdcount != 1;

	my ($labels, $off) = _parse_name($pkt, 12);
	die "no room for the question's type and class\n"
		if $off + 4 > length $pkt;
	my ($qtype, $qclass) = unpack 'n2', substr($pkt, $off, 4);

	# the rest (answer, authority, additional: EDNS0 OPT) is ignored

	my $log = type_name($qtype) . ' ' . _name_text($labels);

	$self->_maybe_reload();

	my $e = $self->{table}{ lc join('.', @$labels) };
	my $rcode = 0;
	my @rrs;

	if ($qclass != 1 && $qclass != 255) {
		$rcode = $RCODE{REFUSED};
	} elsif (!$e) {
		$rcode = $RCODE{NXDOMAIN};
	} elsif ($e->{silent}) {
		return (undef, 0, $log);
	} elsif (defined $e->{rcode}) {
		$rcode = $e->{rcode};
	} else {
		# answers name the question by a pointer to it (offset 12)
		@rrs = $self->_answers($e, "\xc0\x0c", $qtype, 0);
	}

	my $reply = pack('n6', $id,
			0x8000 | 0x0400 | $rd | 0x0080 | $rcode,	# QR AA RA
			1, scalar @rrs, 0, 0)
		. _encode_labels($labels) . pack('n2', $qtype, $qclass)
		. join('', @rrs);

	return ($reply, $e ? $e->{delay} : 0, $log);
}

sub _answers {
	my ($self, $e, $owner, $qtype, $hops) = @_;
	my $ttl = $e->{ttl} // $self->{ttl};
	my $rr = $e->{rr};

	my $rrs = sub {
		my ($type) = @_;
		return map { _rr($owner, $type, $ttl, $_) }
			@{ $rr->{$type} || [] };
	};

	return map { $rrs->($_) } @SERVED if $qtype == $TYPE{ANY};

	my $type = $TYPE_NAME{$qtype} // '';
	return $rrs->($type) if $SERVED{$type} && $rr->{$type};
	return () unless $rr->{CNAME} && $hops < $MAX_HOPS;

	# an alias: the CNAME, then what the table has for its target
	my $target = $rr->{CNAME}[0];
	my @out = _rr($owner, 'CNAME', $ttl, $target);
	my $te = $self->{table}{ lc $target };

	push @out, $self->_answers($te, _encode_name($target), $qtype,
			$hops + 1)
		if $te && !$te->{silent} && !defined $te->{rcode};

	return @out;
}

sub _rr {
	my ($owner, $type, $ttl, $value) = @_;

	my $rdata = $type eq 'A' ? inet_pton(AF_INET, $value)
		: $type eq 'AAAA' ? inet_pton(AF_INET6, $value)
		: $type eq 'TXT' ? _txt($value)
		: _encode_name($value);

	return $owner . pack('n n N n', $TYPE{$type}, 1, $ttl, length $rdata)
		. $rdata;
}

sub _txt {
	my ($s) = @_;
	my @parts = length $s ? unpack('(a255)*', $s) : ('');
	return join '', map { chr(length $_) . $_ } @parts;
}

###############################################################################
# the client, for the tests' own checks

# make_query($name, $type, id => N, rd => 1, edns => 0, class => 1):
# a query packet; in list context (packet, id)
sub make_query {
	my ($name, $type, %o) = @_;

	my $id = $o{id} // int(rand(65536));
	my $flags = ($o{rd} // 1) ? 0x0100 : 0;

	my $pkt = pack('n6', $id, $flags, 1, 0, 0, $o{edns} ? 1 : 0)
		. _encode_name($name)
		. pack('n2', type_code($type), $o{class} // 1);

	# EDNS0: OPT RR, root owner, 1232 bytes, no options
	$pkt .= "\0" . pack('n n N n', $TYPE{OPT}, 1232, 0, 0) if $o{edns};

	return wantarray ? ($pkt, $id) : $pkt;
}

# query_raw($port, $packet, timeout => 2, tcp => 0, host => '127.0.0.1'):
# sends $packet, returns the first reply with the packet's ID (any reply
# if the packet is shorter than 2 bytes), or undef on timeout or refusal.
sub query_raw {
	my ($port, $pkt, %o) = @_;
	my $timeout = $o{timeout} // 2;
	my $host = $o{host} // '127.0.0.1';
	my $deadline = _time() + $timeout;
	my $want = length $pkt >= 2 ? substr($pkt, 0, 2) : undef;

	my $s = IO::Socket::INET->new(
		Proto => $o{tcp} ? 'tcp' : 'udp',
		PeerAddr => "$host:$port",
		($o{tcp} ? (Timeout => $timeout) : ()),
	) or return undef;

	if ($o{tcp}) {
		local $SIG{PIPE} = 'IGNORE';
		my $data = pack('n', length $pkt) . $pkt;
		while (length $data) {
			my $n = syswrite($s, $data);
			return undef unless $n;
			substr($data, 0, $n) = '';
		}

		my $buf = '';
		while (1) {
			if (length $buf >= 2) {
				my $len = unpack 'n', $buf;
				if (length $buf >= 2 + $len) {
					my $msg = substr($buf, 2, $len);
					substr($buf, 0, 2 + $len) = '';
					return $msg if !defined $want
						|| substr($msg, 0, 2) eq $want;
					next;
				}
			}
			my $left = $deadline - _time();
			return undef if $left <= 0;
			my $r = '';
			vec($r, fileno $s, 1) = 1;
			next unless select($r, undef, undef, $left) > 0;
			my $n = sysread($s, $buf, 65536, length $buf);
			return undef unless $n;
		}
	}

	defined $s->send($pkt) or return undef;

	while (1) {
		my $left = $deadline - _time();
		return undef if $left <= 0;
		my $r = '';
		vec($r, fileno $s, 1) = 1;
		next unless select($r, undef, undef, $left) > 0;

		my $buf = '';
		defined $s->recv($buf, 65535, 0) or return undef;   # refused
		return $buf if !defined $want || substr($buf, 0, 2) eq $want;
	}
}

# parse_response($packet) -> {
#	id, rcode ('NOERROR', 'NXDOMAIN', ...), rcode_num, aa, tc, rd, ra,
#	question, qtype, answers => [ { name, type, class, ttl, data } ],
#	data => [ the answers' data of the question's type ],
#	authority, additional (counts)
# }; dies on a malformed packet
sub parse_response {
	my ($pkt) = @_;
	die "short packet\n" unless defined $pkt && length $pkt >= 12;

	my ($id, $flags, $qd, $an, $ns, $ar) = unpack 'n6', $pkt;
	my %r = (
		id => $id,
		qr => $flags & 0x8000 ? 1 : 0,
		aa => $flags & 0x0400 ? 1 : 0,
		tc => $flags & 0x0200 ? 1 : 0,
		rd => $flags & 0x0100 ? 1 : 0,
		ra => $flags & 0x0080 ? 1 : 0,
		opcode => ($flags >> 11) & 0xf,
		rcode_num => $flags & 0xf,
		rcode => rcode_name($flags & 0xf),
		authority => $ns,
		additional => $ar,
		answers => [],
		data => [],
	);

	my $off = 12;
	for my $i (1 .. $qd) {
		my $labels;
		($labels, $off) = _parse_name($pkt, $off);
		die "short question\n" if $off + 4 > length $pkt;
		if ($i == 1) {
			$r{question} = _name_text($labels);
			$r{qtype} = type_name(unpack 'n', substr($pkt, $off, 2));
		}
		$off += 4;
	}

	for (1 .. $an) {
		my $labels;
		($labels, $off) = _parse_name($pkt, $off);
		die "short answer\n" if $off + 10 > length $pkt;
		my ($type, $class, $ttl, $len) =
			unpack 'n n N n', substr($pkt, $off, 10);
		$off += 10;
		die "answer data runs past the packet\n"
			if $off + $len > length $pkt;

		my $rdata = substr($pkt, $off, $len);
		my $tn = type_name($type);
		my $data;

		if ($tn eq 'A' && $len == 4) {
			$data = inet_ntop(AF_INET, $rdata);
		} elsif ($tn eq 'AAAA' && $len == 16) {
			$data = inet_ntop(AF_INET6, $rdata);
		} elsif ($tn eq 'PTR' || $tn eq 'CNAME' || $tn eq 'NS') {
			$data = _name_text((_parse_name($pkt, $off))[0]);
		} elsif ($tn eq 'TXT') {
			$data = '';
			my $p = 0;
			while ($p < $len) {
				my $l = ord substr($rdata, $p, 1);
				$data .= substr($rdata, $p + 1, $l);
				$p += 1 + $l;
			}
		} else {
			$data = unpack 'H*', $rdata;
		}

		$off += $len;

		push @{ $r{answers} }, {
			name => _name_text($labels), type => $tn,
			class => $class, ttl => $ttl, data => $data,
		};
		push @{ $r{data} }, $data
			if defined $r{qtype} && $tn eq $r{qtype};
	}

	return \%r;
}

# query($port, $name, $type, timeout => 2, tcp => 0, edns => 0, rd => 1):
# the parsed reply (see parse_response) plus elapsed (seconds), undef on
# timeout, { rcode => 'MALFORMED', error => ... } on a broken reply.
# As a method of a started server: $dns->query($name, $type, %options).
sub query {
	my $self = blessed $_[0] ? shift : undef;
	my ($port, $name, $type, %o) = $self ? ($self->{port}, @_) : @_;

	my ($pkt) = make_query($name, $type, %o);
	my $start = _time();
	my $reply = query_raw($port, $pkt, %o);
	return undef unless defined $reply;

	my $r = eval { parse_response($reply) }
		|| { rcode => 'MALFORMED', error => $@, answers => [],
			data => [] };
	$r->{elapsed} = _time() - $start;
	return $r;
}

# Waits (up to timeout, 5 s) until a server answers on the port; 1 or 0.
# The probe is an opcode STATUS packet: answered NOTIMP, never logged.
sub wait_dns {
	my ($port, %o) = @_;
	my $deadline = _time() + ($o{timeout} // 5);

	while (_time() < $deadline) {
		my $probe = pack('n6', int(rand(65536)), 2 << 11, 0, 0, 0, 0);
		return 1 if defined query_raw($port, $probe, timeout => 0.2);
		Time::HiRes::sleep(0.05);
	}

	return 0;
}

###############################################################################
# the query log

# queries($log): the logged queries, oldest first, as 'TYPE NAME' strings
# (names as the client sent them).  As a method: $dns->queries().
sub queries {
	my $self = blessed $_[0] ? shift : undef;
	my ($log) = $self ? ($self->{log}) : @_;

	open(my $fh, '<', $log) or return ();
	binmode $fh;
	local $/;
	my $c = <$fh> // '';
	close $fh;

	# a line being appended right now has no newline yet
	return map { s/\n\z//r } $c =~ /^(.*\n)/mg;
}

# query_count($log, $type, $name): how many queries for that type (undef:
# any) and name (undef: any; case-insensitive, a trailing dot ignored).
# As a method: $dns->query_count($type, $name).
sub query_count {
	my $self = blessed $_[0] ? shift : undef;
	my ($log, $type, $name) = $self ? ($self->{log}, @_) : @_;

	$type = uc $type if defined $type;
	if (defined $name) {
		$name = lc $name;
		$name =~ s/\.\z// unless $name eq '.';
	}

	my $n = 0;
	for my $q ($self ? $self->queries() : queries($log)) {
		my ($t, $qn) = split / /, $q, 2;
		next if defined $type && $t ne $type;
		next if defined $name && lc($qn) ne $name;
		$n++;
	}

	return $n;
}

###############################################################################
# convenience: one call to start a server in a test

# my $dns = Crawlward::DNS->start($t, port => port(8053, udp => 1),
#	tcp => port(8053, udp => 1, socket => 1), records => \%records);
sub start {
	my ($class, $t, %o) = @_;

	my $port = $o{port};
	die "Crawlward::DNS->start: port is required\n" unless $port;

	my $d = $t->testdir();
	my $self = bless {
		port => $port,
		log => $o{log} // "$d/dns-$port.log",
		records_file => $o{records_file} // "$d/dns-$port.records",
	}, $class;

	write_records($self->{records_file}, $o{records} || {})
		if $o{records} || !-e $self->{records_file};

	$t->run_daemon(\&run,
		port => $port,
		records_file => $self->{records_file},
		log => $self->{log},
		map { exists $o{$_} ? ($_ => $o{$_}) : () }
			qw/ tcp ttl verbose /);

	wait_dns($port, timeout => $o{wait} // 5)
		or die "Crawlward::DNS: no DNS server on 127.0.0.1:$port "
			. "after " . ($o{wait} // 5) . "s\n";

	return $self;
}

sub port { $_[0]{port} }
sub log_file { $_[0]{log} }
sub records_file { $_[0]{records_file} }

sub set_records {
	my ($self, $records) = @_;
	write_records($self->{records_file}, $records);
	return $self;
}

1;

__END__

=head1 NAME

Crawlward::DNS - a small scriptable DNS server for crawlward's nginx tests

=head1 SYNOPSIS

    use Test::Nginx;
    use Crawlward::DNS qw/ reverse_name write_records query_count /;

    my $t = Test::Nginx->new()->has(qw/http/)->plan(3);
    my $d = $t->testdir();

    write_records("$d/dns.records", {
        reverse_name('127.0.0.2') =>
            { PTR => 'crawl-127-0-0-2.googlebot.com' },
        'crawl-127-0-0-2.googlebot.com' => { A => '127.0.0.2' },
        reverse_name('::1') => { PTR => 'host.example' },
        'host.example' => { AAAA => '::1', ttl => 1 },
        'slow.example' => { A => '127.0.0.9', delay => 0.5 },
        'dead.example' => { silent => 1 },
        'broken.example' => { servfail => 1 },
    });

    $t->run_daemon(\&Crawlward::DNS::run,
        port => port(8053, udp => 1),
        tcp => port(8053, udp => 1, socket => 1),   # optional
        records_file => "$d/dns.records",
        log => "$d/dns.log");
    Crawlward::DNS::wait_dns(port(8053, udp => 1)) or die "no DNS\n";

    # nginx.conf: resolver 127.0.0.1:%%PORT_8053_UDP%% ipv6=off;
    #             resolver_timeout 1s;
    ...
    is(query_count("$d/dns.log", 'PTR', reverse_name('127.0.0.2')), 1);

    # next phase: same server, new table (seen from the next query on)
    write_records("$d/dns.records", { ... { servfail => 1 } ... });

Or, in one call:

    my $dns = Crawlward::DNS->start($t, port => port(8053, udp => 1),
        records => { ... });         # files dns-PORT.{records,log} in testdir
    $dns->set_records({ ... });
    $dns->query_count('A', 'crawl-127-0-0-2.googlebot.com');
    $dns->queries;                   # ('PTR 2.0.0.127.in-addr.arpa', ...)
    $dns->query('host.example', 'AAAA')->{data};   # ['::1']

=head1 RECORDS

A hash of names (case-insensitive, a trailing dot ignored) to hashes of:

=over

=item A, AAAA, PTR, CNAME, NS, TXT

a value or an array of values; several give several answers, in order.  A
query for a type the name lacks gets NOERROR with no answers (NODATA),
except that a name with a CNAME answers any other type with the CNAME and
whatever the table has for its target (up to 8 hops).  A name not in the
table gets NXDOMAIN.  C<< name => {} >> is a name with no records.

=item ttl

seconds, for this name's answers (default: the server's C<ttl>, 300).

=item delay

seconds to wait before answering (other queries are answered meanwhile).

=item silent

never answer (the client times out).

=item servfail, refused, rcode

answer with SERVFAIL (2), REFUSED (5), or any rcode (a name or 0-15;
C<< rcode => 'NXDOMAIN' >> for a name the table must keep).

=back

Answers name the question by a compression pointer, so they carry the
question's spelling (case); the question is echoed as received.  Flags: QR,
AA, RA and the query's RD.  Queries of a class other than IN or ANY get
REFUSED.  No truncation: UDP replies may exceed 512 bytes (nginx reads up to
4096).

=head1 SERVER

C<run(%options)> is the daemon body for C<run_daemon>; it serves until
SIGTERM or until its parent process has gone (checked every 0.5 s), then
calls C<_exit> (1 after printing why, if it could not start), so it never
returns into a forked copy of the test under either harness.  C<serve()> is
the same loop, returning.  Options:

=over

=item port

UDP port on 127.0.0.1 (required).  Take it with C<port(N, udp =E<gt> 1)>:
the harness reserves the other protocol on the same number.

=item tcp

a socket to listen on for DNS over TCP, normally
C<port(N, udp =E<gt> 1, socket =E<gt> 1)>, the harness's TCP reservation
for that same number; or 1 to bind 127.0.0.1:port itself (only when nothing
else holds it).  Default: UDP only.

=item records_file

a file written by C<write_records($file, \%records)>; re-read whenever its
device, inode, size or (sub-second) mtime changes, checked on every query,
so a test that calls C<write_records> gets the new table from its next
query on.  A broken file at start is fatal; a broken rewrite is reported on
stderr and the old table kept.

=item records

a table to serve when there is no records_file (or until it exists).

=item log

file to append one line per query to, "TYPE NAME" (type by name or TYPEnn,
the name as sent, odd octets as \DDD), written when the query arrives, so
silent and delayed queries count.  Malformed packets and wait_dns() probes
are not logged.  Created at start, after the sockets are bound: a
C<< $t->waitforfile($log) >> readiness check.

=item ttl

default TTL (300).

=item verbose

report skipped malformed packets on stderr (default: TEST_NGINX_VERBOSE).

=back

Malformed packets (short, truncated names, pointer loops, bad label types,
responses, more than one question) are dropped without an answer.  Packets
with an opcode other than QUERY get NOTIMP.

=head1 CLIENT AND HELPERS

C<reverse_name($addr)>, C<query($port, $name, $type, %o)> (timeout 2, tcp,
edns, rd, id, class; returns parse_response()'s hash plus elapsed, or undef
on timeout), C<query_raw($port, $bytes, %o)>, C<make_query>,
C<parse_response>, C<wait_dns($port, timeout =E<gt> 5)>,
C<write_records>, C<read_records>, C<queries($log)>,
C<query_count($log, $type, $name)>.  All exportable; C<:all> tag.

=cut
