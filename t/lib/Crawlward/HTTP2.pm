package Crawlward::HTTP2;

# A small HTTP/2 client for the tests, over cleartext with prior knowledge
# (RFC 9113 section 3.3): the connection preface, SETTINGS, request HEADERS
# (split into CONTINUATION frames past the peer's frame size) encoded with
# HPACK literals only (RFC 7541 section 6.2.2, no Huffman, no dynamic
# table), and a reader that collects, per stream, the response's :status,
# its body, and any RST_STREAM or GOAWAY. It decodes only the first field of
# a response header block, which nginx always sends as :status (an indexed
# static entry, or a literal with the :status name and three digits).
#
#   my $h2 = Crawlward::HTTP2->new(port(8080));
#   my $sid = $h2->request('/page', 'user-agent' => $ua);
#   my %done = $h2->collect([$sid], 5);      # $done{$sid}{status}, {body}, {rst}
#   $h2->goaway;                             # the GOAWAY the server sent, if any

use warnings;
use strict;

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw/ time /;

use constant {
	DATA => 0, HEADERS => 1, RST_STREAM => 3, SETTINGS => 4, PING => 6,
	GOAWAY => 7, WINDOW_UPDATE => 8, CONTINUATION => 9,
	END_STREAM => 1, ACK => 1, END_HEADERS => 4, PADDED => 8, PRIORITY => 0x20,
};

# the static table's :status entries (RFC 7541 appendix A)
my %STATIC_STATUS = (8 => 200, 9 => 204, 10 => 206, 11 => 304, 12 => 400,
	13 => 404, 14 => 500);

sub new {
	my ($class, $port, %o) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
		Timeout => 5) or die "http2: connect to $port: $@\n";
	binmode $s;
	my $self = bless { s => $s, next_id => 1, buf => '', streams => {},
		max_frame => 16384, goaway => undef }, $class;
	# the preface, our SETTINGS (a large window: bodies are not flow-controlled here),
	# and a connection window as large
	$self->_send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
	$self->frame(SETTINGS, 0, 0, pack('nN', 4, 0x7fffffff));
	$self->frame(WINDOW_UPDATE, 0, 0, pack('N', 0x7fffffff - 65535));
	return $self;
}

sub _send {
	my ($self, $bytes) = @_;
	local $SIG{PIPE} = 'IGNORE';
	my $off = 0;
	while ($off < length $bytes) {
		my $n = syswrite($self->{s}, $bytes, length($bytes) - $off, $off);
		return 0 unless $n;
		$off += $n;
	}
	return 1;
}

# frame(TYPE, FLAGS, STREAM, PAYLOAD): send one frame
sub frame {
	my ($self, $type, $flags, $sid, $payload) = @_;
	my $len = length $payload;
	return $self->_send(pack('nCCCN', $len >> 8, $len & 0xff, $type, $flags,
		$sid & 0x7fffffff) . $payload);
}

# an HPACK integer with an N-bit prefix, the first byte's high bits FIRST
sub _int {
	my ($value, $n, $first) = @_;
	my $max = (1 << $n) - 1;
	return pack('C', $first | $value) if $value < $max;
	my $out = pack('C', $first | $max);
	$value -= $max;
	while ($value >= 128) {
		$out .= pack('C', ($value & 0x7f) | 0x80);
		$value >>= 7;
	}
	return $out . pack('C', $value);
}

# a literal field without indexing, with a literal name
sub _field {
	my ($name, $value) = @_;
	return "\x00" . _int(length $name, 7, 0) . $name
		. _int(length $value, 7, 0) . $value;
}

# request(PATH, NAME => VALUE, ...): open a stream with a GET; its id.
# The header block is split into CONTINUATION frames past the frame size.
sub request {
	my ($self, $path, @headers) = @_;
	my $sid = $self->{next_id};
	$self->{next_id} += 2;
	my $block = _field(':method', 'GET') . _field(':scheme', 'http')
		. _field(':authority', 'localhost') . _field(':path', $path);
	while (my ($n, $v) = splice @headers, 0, 2) {
		$block .= _field(lc $n, $v);
	}
	$self->{streams}{$sid} = { status => undef, body => '', done => 0 };
	my $type = HEADERS;
	my $flags = END_STREAM;
	while (1) {
		my $chunk = substr($block, 0, $self->{max_frame}, '');
		my $last = $block eq '';
		$self->frame($type, $flags | ($last ? END_HEADERS : 0), $sid, $chunk);
		last if $last;
		($type, $flags) = (CONTINUATION, 0);
	}
	return $sid;
}

# read and handle the frames that arrive within WAIT seconds; false when the
# connection closed
sub _read {
	my ($self, $wait) = @_;
	my $sel = IO::Select->new($self->{s});
	if ($sel->can_read($wait)) {
		my $n = sysread($self->{s}, $self->{buf}, 65536, length $self->{buf});
		return 0 unless $n;
	}
	while (length $self->{buf} >= 9) {
		my ($l1, $l2, $type, $flags, $sid) = unpack('nCCCN', $self->{buf});
		my $len = $l1 << 8 | $l2;
		last if length $self->{buf} < 9 + $len;
		my $payload = substr($self->{buf}, 9, $len);
		substr($self->{buf}, 0, 9 + $len, '');
		$self->_handle($type, $flags, $sid & 0x7fffffff, $payload);
	}
	return 1;
}

sub _handle {
	my ($self, $type, $flags, $sid, $payload) = @_;
	my $st = $self->{streams}{$sid};
	if ($type == SETTINGS && !($flags & ACK)) {
		for (my $i = 0; $i + 6 <= length $payload; $i += 6) {
			my ($id, $value) = unpack('nN', substr($payload, $i, 6));
			$self->{max_frame} = $value if $id == 5;
		}
		$self->frame(SETTINGS, ACK, 0, '');
	} elsif ($type == PING && !($flags & ACK)) {
		$self->frame(PING, ACK, 0, $payload);
	} elsif ($type == GOAWAY) {
		my ($last, $code) = unpack('NN', $payload);
		$self->{goaway} = { last_stream => $last & 0x7fffffff, code => $code };
	} elsif ($type == RST_STREAM && $st) {
		$st->{rst} = unpack('N', $payload);
		$st->{done} = 1;
	} elsif ($type == HEADERS && $st) {
		my $block = $payload;
		if ($flags & PADDED) {
			my $pad = ord $block;
			$block = substr($block, 1, length($block) - 1 - $pad);
		}
		$block = substr($block, 5) if $flags & PRIORITY;
		$st->{status} //= _status($block);
		$st->{done} = 1 if $flags & END_STREAM;
	} elsif ($type == DATA && $st) {
		my $data = $payload;
		if ($flags & PADDED) {
			my $pad = ord $data;
			$data = substr($data, 1, length($data) - 1 - $pad);
		}
		$st->{body} .= $data;
		$st->{done} = 1 if $flags & END_STREAM;
	}
}

# the :status of a response header block: its first field
sub _status {
	my ($block) = @_;
	my $b = ord $block;
	return $STATIC_STATUS{$b & 0x7f} if $b & 0x80;
	# a literal with the static name :status (index 8), with or without indexing
	if ($b == 0x48 || $b == 0x08 || $b == 0x18) {
		my $len = ord substr($block, 1, 1);
		return substr($block, 2, $len) if !($len & 0x80) && $len == 3;
	}
	return 'undecoded';
}

# collect([STREAM, ...], SECONDS): read until each stream ended (END_STREAM or
# RST_STREAM), the connection closed, or the time ran out; a hash of those
# streams: { status, body, rst, done }
sub collect {
	my ($self, $sids, $seconds) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline) {
		last unless grep { !$self->{streams}{$_}{done} } @$sids;
		last unless $self->_read(0.2);
	}
	return map { $_ => $self->{streams}{$_} } @$sids;
}

# whether the server closed the connection within SECONDS
sub closed {
	my ($self, $seconds) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline) {
		return 1 unless $self->_read(0.2);
	}
	return 0;
}

sub goaway { $_[0]{goaway} }

sub close {
	my ($self) = @_;
	$self->{s}->close();
}

1;
