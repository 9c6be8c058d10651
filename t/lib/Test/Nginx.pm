package Test::Nginx;

# Small Test::Nginx-compatible harness for crawlward's nginx tests.
#
# It follows the interface of nginx-tests' lib/Test/Nginx.pm (same exports,
# methods, %%...%% macros and TEST_NGINX_* variables) so that one .t file
# runs unchanged under either, but it is an independent, smaller
# implementation using core Perl modules only.  Differences from the
# upstream harness are listed in the POD at the end of this file.

use warnings;
use strict;

use base qw/ Exporter /;

our @EXPORT = qw/ log_in log_out http http_get http_head port /;
our @EXPORT_OK = qw/ http_start http_end http_content /;

use Errno qw/ ECONNRESET EINTR /;
use File::Path qw/ rmtree /;
use File::Spec qw//;
use File::Temp qw/ tempdir /;
use IO::Socket::INET;
use POSIX qw/ WNOHANG _exit /;
use Test::More qw//;

our $VERSION = '0.1';

# Test::More looks up $TODO in the package that calls is(), i.e. this one.
our $TODO;

our $NGINX = defined $ENV{TEST_NGINX_BINARY} ? $ENV{TEST_NGINX_BINARY}
	: '/usr/sbin/nginx';

our %ports;		# nominal port => { port => N, lock => socket }

my $IO_TIMEOUT = 8;	# seconds for each connect+send and each read
my $START_WAIT = 5;	# seconds to wait for nginx.pid
my $RELOAD_WAIT = 10;	# seconds to wait for new workers after HUP
my $QUIT_WAIT = 20;	# graceful stop, then TERM
my $TERM_WAIT = 5;	# then KILL

###############################################################################
# object life cycle

sub new {
	my ($class) = @_;
	$class = __PACKAGE__ unless defined $class && !ref $class;

	my $self = bless {
		_pid => $$,
		_alerts => 1,
		_daemons => [],
	}, $class;

	$self->{_testdir} = tempdir('nginx-test-XXXXXXXXXX', TMPDIR => 1)
		or die "Can't create temp directory: $!\n";

	Test::More::BAIL_OUT("no $NGINX binary found") unless -x $NGINX;

	# turn ^C / kill into an ordinary death, so that DESTROY still
	# stops nginx and the daemons

	for my $sig (qw/ INT TERM /) {
		next if defined $SIG{$sig} && $SIG{$sig} ne ''
			&& $SIG{$sig} ne 'DEFAULT';
		$SIG{$sig} = sub { die "Test::Nginx: got SIG$_[0]\n" };
	}

	return $self;
}

sub DESTROY {
	my ($self) = @_;
	local ($?, $@, $!);

	return if !defined $self->{_pid} || $self->{_pid} != $$;

	eval { $self->stop(); };
	Test::More::diag("stop: $@") if $@;
	eval { $self->stop_daemons(); };
	Test::More::diag("stop_daemons: $@") if $@;

	my $log = $self->_slurp("$self->{_testdir}/error.log");
	$log = '' unless defined $log;

	if (Test::More->builder->expected_tests) {
		local $TODO = 'alerts' unless $self->{_alerts};
		my @alerts = $log =~ /^.+\[alert\].+$/gm;
		Test::More::is(join("\n", @alerts), '', 'no alerts');
	}

	if (Test::More->builder->expected_tests) {
		local $TODO;
		my @san = $log =~ /^.+Sanitizer.+$/gm;
		Test::More::is(join("\n", @san), '', 'no sanitizer errors');
	}

	if ($ENV{TEST_NGINX_CATLOG}) {
		print STDERR $log;
	}

	if ($ENV{TEST_NGINX_LEAVE}) {
		Test::More::diag("test directory left in $self->{_testdir}")
			if $ENV{TEST_NGINX_VERBOSE};
	} else {
		eval { rmtree($self->{_testdir}); };
	}
}

sub testdir {
	my ($self) = @_;
	return $self->{_testdir};
}

sub plan {
	my ($self, $n) = @_;

	# DESTROY adds "no alerts" and "no sanitizer errors"
	Test::More::plan(tests => $n + 2);
	return $self;
}

sub todo_alerts {
	my ($self) = @_;
	$self->{_alerts} = 0;
	return $self;
}

sub args {
	my ($self, @args) = @_;
	$self->{_args} = [ @args ];
	return $self;
}

###############################################################################
# feature checks

# modules that are present unless configure was given --without-<name>
my @WITHOUT = (
	(map { [ $_, "http_${_}_module" ] } qw/
		charset gzip ssi mirror userid access auth_basic autoindex
		geo map referer rewrite proxy fastcgi uwsgi scgi grpc
		memcached limit_conn limit_req empty_gif browser split_clients
		upstream_hash upstream_ip_hash upstream_least_conn
		upstream_random upstream_keepalive upstream_zone
	/),
	(map { [ $_, "${_}_module" ] } qw/
		stream_access stream_geo stream_limit_conn stream_map
		stream_return stream_split_clients stream_upstream_hash
		stream_upstream_least_conn stream_upstream_random
		stream_upstream_zone stream_pass stream_set
	/),
	(map { [ $_, "mail_${_}_module" ] } qw/ pop3 imap smtp /),
	[ 'http', 'http' ],
	[ 'cache', 'http-cache' ],
	[ 'pcre', 'pcre' ],
);

# modules that are present only with --with-<name>
my %WITH = (
	sni => qr/TLS SNI support enabled/,
	mail => qr/--with-mail(?:\s|=dynamic|$)/m,
	stream => qr/--with-stream(?:\s|=dynamic|$)/m,
	stream_ssl => qr/--with-stream_ssl_module/,
	flv => qr/--with-http_flv_module/,
	perl => qr/--with-http_perl_module/,
	auth_request => qr/--with-http_auth_request_module/,
	realip => qr/--with-http_realip_module/,
	sub => qr/--with-http_sub_module/,
	ssl => qr/--with-http_ssl_module/,
);

# modules that may be built as dynamic modules: feature => .so base name
# feature => [ configure option, .so base name ]
my %DYNAMIC = (
	http_geoip => [ 'http_geoip_module', 'ngx_http_geoip_module' ],
	image_filter => [ 'http_image_filter_module',
		'ngx_http_image_filter_module' ],
	perl => [ 'http_perl_module', 'ngx_http_perl_module' ],
	xslt => [ 'http_xslt_module', 'ngx_http_xslt_filter_module' ],
	mail => [ 'mail', 'ngx_mail_module' ],
	stream => [ 'stream', 'ngx_stream_module' ],
	stream_geoip => [ 'stream_geoip_module', 'ngx_stream_geoip_module' ],
);

# is feature $f built as a dynamic module? returns the .so base name
sub _dynamic_so {
	my ($self, $f) = @_;
	my $d = $DYNAMIC{$f} or return undef;
	return $self->_nginx_v() =~ /--with-\Q$d->[0]\E=dynamic/ ? $d->[1] : undef;
}

sub _nginx_v {
	my ($self) = @_;
	$self->{_configure_args} = `$NGINX -V 2>&1`
		unless defined $self->{_configure_args};
	return $self->{_configure_args};
}

sub has {
	my ($self, @features) = @_;

	for my $f (@features) {
		next if $self->has_module($f) || $self->has_feature($f);
		Test::More::plan(skip_all => "no $f available");
	}

	return $self;
}

sub has_module {
	my ($self, $f) = @_;
	my $v = $self->_nginx_v();

	my ($without) = grep { $_->[0] eq $f } @WITHOUT;
	my $re = $without ? qr/--without-\Q$without->[1]\E(?!\S)/ : undef;

	my $present = $without ? $v !~ $re
		: $WITH{$f} ? $v =~ $WITH{$f}
		: $v =~ /$f/;		# free-form regex, as upstream allows

	return 0 unless $present;

	# a dynamic module counts only if it will actually be loaded
	if (my $so = $self->_dynamic_so($f)) {
		return 1 if $self->_loaded_by_globals($so);
		return -f $self->_modules_dir() . "/$so.so" ? 1 : 0;
	}

	return 1;
}

sub _loaded_by_globals {
	my ($self, $so) = @_;
	my $g = $ENV{TEST_NGINX_GLOBALS};
	return 0 unless defined $g;
	return $g =~ /load_module\s+[^;]*\Q$so\E[-\w]*\.so\s*;/;
}

sub _modules_dir {
	my ($self) = @_;
	my $dir = $ENV{TEST_NGINX_MODULES};
	if (!defined $dir) {
		my ($vol, $d) = File::Spec->splitpath($NGINX);
		$dir = File::Spec->catpath($vol, $d, '');
		$dir = '.' if $dir eq '';
	}
	$dir = File::Spec->rel2abs($dir);
	$dir =~ s!/+$!!;
	return $dir;
}

sub has_feature {
	my ($self, $f) = @_;

	return 1 if $f eq 'symlink' || $f eq 'unix' || $f eq 'udp';

	if ($f =~ /^socket_ssl/) {
		return 0 unless eval { require IO::Socket::SSL; 1 };
		return 1 if $f eq 'socket_ssl';
		return eval { IO::Socket::SSL->can_client_sni() } ? 1 : 0
			if $f eq 'socket_ssl_sni';
		return eval { IO::Socket::SSL->can_alpn() } ? 1 : 0
			if $f eq 'socket_ssl_alpn';
		return 0;
	}

	if ($f =~ /^(openssl|libressl):([0-9.]+)([a-z]*)$/) {
		my ($lib, $need, $p) = ($1, $2, $3);
		$self->_nginx_v() =~ /with $lib ([0-9.]+)([a-z]*)/i or return 0;
		return _vcmp([ split(/\./, $1), unpack('C*', $2) ],
			[ split(/\./, $need), unpack('C*', $p) ]) >= 0;
	}

	return 0;
}

# compare version arrays: only as many components as $need has matter
sub _vcmp {
	my ($have, $need) = @_;
	for my $i (0 .. $#$need) {
		my $h = $have->[$i] || 0;
		return -1 if $h < $need->[$i];
		return 1 if $h > $need->[$i];
	}
	return 0;
}

sub has_version {
	my ($self, $need) = @_;
	$self->_nginx_v() =~ m!nginx version: \S+?/([0-9.]+)! or return 0;
	return _vcmp([ split /\./, $1 ], [ split /\./, $need ]) >= 0 ? 1 : 0;
}

sub has_daemon {
	my ($self, $prog) = @_;

	my $found = $prog =~ m!/! ? -x $prog
		: grep { -f "$_/$prog" && -x _ }
			split /:/, ($ENV{PATH} || '');

	Test::More::plan(skip_all => "$prog not found") unless $found;
	return $self;
}

###############################################################################
# files

sub write_file {
	my ($self, $name, $content) = @_;
	my $path = "$self->{_testdir}/$name";

	open(my $fh, '>', $path) or die "Can't create $name: $!\n";
	binmode $fh;
	print {$fh} $content;
	close($fh) or die "Can't write $name: $!\n";

	return $self;
}

sub write_file_expand {
	my ($self, $name, $content) = @_;
	my $dir = $self->{_testdir};

	$content =~ s/%%TEST_GLOBALS%%/$self->test_globals()/ge;
	$content =~ s/%%TEST_GLOBALS_HTTP%%/$self->test_globals_http()/ge;
	$content =~ s/%%TEST_GLOBALS_STREAM%%/$self->test_globals_stream()/ge;
	$content =~ s/%%TESTDIR%%/$dir/g;

	# as upstream: literal 127.0.0.1:8xxx is remapped too
	$content =~ s/127\.0\.0\.1:(8\d\d\d)\b/'127.0.0.1:' . port($1)/ge;

	$content =~ s/%%PORT_(\d+)_UDP%%/port($1, udp => 1)/ge;
	$content =~ s/%%PORT_(\d+)%%/port($1)/ge;

	return $self->write_file($name, $content);
}

sub read_file {
	my ($self, $name) = @_;
	my $c = $self->_slurp("$self->{_testdir}/$name");
	die "Can't open $name: $!\n" unless defined $c;
	return $c;
}

sub _slurp {
	my ($self, $path, $offset) = @_;
	open(my $fh, '<', $path) or return undef;
	binmode $fh;
	seek($fh, $offset, 0) if $offset;
	local $/;
	my $c = <$fh>;
	return defined $c ? $c : '';
}

sub test_globals {
	my ($self) = @_;
	return $self->{_test_globals} if defined $self->{_test_globals};

	my $d = $self->{_testdir};
	my $s = "pid $d/nginx.pid;\n"
		. "error_log $d/error.log debug;\n";

	$s .= $ENV{TEST_NGINX_GLOBALS} . "\n" if $ENV{TEST_NGINX_GLOBALS};

	# load_module lines for dynamic modules that exist in
	# TEST_NGINX_MODULES (default: the binary's directory)
	for my $f (sort keys %DYNAMIC) {
		my $so = $self->_dynamic_so($f) or next;
		next if $self->_loaded_by_globals($so);
		my $file = $self->_modules_dir() . "/$so.so";
		$s .= "load_module $file;\n" if -f $file;
	}

	return $self->{_test_globals} = $s;
}

sub test_globals_http {
	my ($self) = @_;
	return $self->{_test_globals_http}
		if defined $self->{_test_globals_http};

	my $d = $self->{_testdir};
	my $s = "root $d;\n"
		. "access_log $d/access.log;\n"
		. "client_body_temp_path $d/client_body_temp;\n";

	for my $m (qw/ proxy fastcgi uwsgi scgi /) {
		$s .= "${m}_temp_path $d/${m}_temp;\n" if $self->has_module($m);
	}

	$s .= $ENV{TEST_NGINX_GLOBALS_HTTP} . "\n"
		if $ENV{TEST_NGINX_GLOBALS_HTTP};

	return $self->{_test_globals_http} = $s;
}

sub test_globals_stream {
	my ($self) = @_;
	return $self->{_test_globals_stream}
		if defined $self->{_test_globals_stream};

	my $s = '';
	$s .= $ENV{TEST_NGINX_GLOBALS_STREAM} . "\n"
		if $ENV{TEST_NGINX_GLOBALS_STREAM};

	return $self->{_test_globals_stream} = $s;
}

###############################################################################
# nginx process control

# command line shared by run(), dump_config(): when the config did not use
# %%TEST_GLOBALS%%, pid and error_log are forced with -g
sub _cmdline {
	my ($self, @extra) = @_;
	my $d = $self->{_testdir};
	my @g = defined $self->{_test_globals} ? ()
		: ('-g', "pid $d/nginx.pid; error_log $d/error.log debug;");
	return ($NGINX, '-p', "$d/", '-c', 'nginx.conf', '-e', 'error.log',
		@extra, @{ $self->{_args} || [] }, @g);
}

sub run {
	my ($self, $conf) = @_;
	my $d = $self->{_testdir};

	if (defined $conf) {
		open(my $fh, '<', $conf) or die "Can't open $conf: $!\n";
		local $/;
		$self->write_file_expand('nginx.conf', scalar <$fh>);
	}

	die "nginx already started\n" if $self->{_started};

	unlink "$d/nginx.pid";
	my $log_off = -s "$d/error.log" || 0;
	my @cmd = $self->_cmdline();

	my $child = fork();
	die "Can't fork: $!\n" unless defined $child;

	if ($child == 0) {
		$SIG{$_} = 'DEFAULT' for qw/ INT TERM /;
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>', '/dev/null');	# keep TAP output clean
		open(STDERR, '>', '/dev/null') if $self->{_quiet};
		no warnings "exec";
		exec { $cmd[0] } @cmd;
		print STDERR "Can't exec $cmd[0]: $!\n";
		_exit(127);
	}

	# wait for the pid file; with "daemon off" the child is the master,
	# otherwise the child exits 0 once the daemon is forked

	my ($status, $pid);
	my $deadline = time() + $START_WAIT;

	while (1) {
		$pid = $self->_pidfile_pid();
		last if $pid;

		if (!defined $status && waitpid($child, WNOHANG) == $child) {
			$status = $?;
			last if $status != 0;
		}

		last if time() > $deadline;
		select(undef, undef, undef, 0.05);
	}

	if (!$pid) {
		if (!defined $status) {
			kill 'KILL', $child;
			waitpid($child, 0);
		}

		my $why = !defined $status ? "no pid file after ${START_WAIT}s"
			: 'exit status ' . ($status >> 8)
				. ($status & 127 ? ', signal ' . ($status & 127)
					: '');
		my $log = $self->_slurp("$d/error.log", $log_off);
		$log = '(no error.log)' unless defined $log && length $log;
		$log = substr($log, -4000) if length($log) > 4000;

		die "Can't start nginx ($why): @cmd\nerror.log:\n$log\n";
	}

	# daemonized: reap the intermediate process (it exits at once)
	if ($pid != $child && !defined $status) {
		for (1 .. 40) {
			last if waitpid($child, WNOHANG) != 0;
			select(undef, undef, undef, 0.05);
		}
		kill('KILL', $child) && waitpid($child, 0) if _alive($child);
		$status = 0;
	}

	$self->{_child} = defined $status ? undef : $child;
	$self->{_master} = $pid;
	$self->{_started} = 1;

	return $self;
}

sub try_run {
	my ($self, $message) = @_;

	local $self->{_quiet} = 1;
	eval { $self->run(); };
	return $self unless $@;

	log_core('', $@) if $ENV{TEST_NGINX_VERBOSE};
	Test::More::plan(skip_all => $message);
	return $self;
}

sub dump_config {
	my ($self) = @_;
	my @cmd = $self->_cmdline('-T');
	my $out = '';

	my $pid = open(my $fh, '-|');
	die "Can't fork: $!\n" unless defined $pid;
	if ($pid == 0) {
		open(STDERR, '>&', \*STDOUT);
		no warnings "exec";
		exec { $cmd[0] } @cmd;
		_exit(127);
	}
	local $/;
	$out = <$fh>;
	close $fh;
	return $out;
}

sub _pidfile_pid {
	my ($self) = @_;
	my $c = $self->_slurp("$self->{_testdir}/nginx.pid");
	return (defined $c && $c =~ /^\s*(\d+)\s*$/) ? $1 : undef;
}

# is process alive (and not a zombie)?
sub _alive {
	my ($pid) = @_;
	return 0 unless $pid && kill(0, $pid);
	if (open(my $fh, '<', "/proc/$pid/stat")) {
		my $stat = <$fh>;
		return 0 if defined $stat && $stat =~ /\)\s+Z\s/;
	}
	return 1;
}

# direct children of a process, via /proc (empty list elsewhere)
sub _children {
	my ($ppid) = @_;
	my @kids;
	opendir(my $dh, '/proc') or return ();
	for my $p (grep { /^\d+$/ } readdir $dh) {
		open(my $fh, '<', "/proc/$p/stat") or next;
		my $stat = <$fh>;
		next unless defined $stat && $stat =~ /\)\s+(\S)\s+(\d+)/;
		push @kids, $p if $2 == $ppid && $1 ne 'Z';
	}
	return @kids;
}

# wait until the nginx master is gone, up to $secs
sub _wait_master {
	my ($self, $secs) = @_;
	my $deadline = time() + $secs;

	while (1) {
		if ($self->{_child}) {
			my $r = waitpid($self->{_child}, WNOHANG);
			return 1 if $r == $self->{_child} || $r == -1;
		} else {
			return 1 unless _alive($self->{_master});
		}
		return 0 if time() > $deadline;
		select(undef, undef, undef, 0.05);
	}
}

sub stop {
	my ($self) = @_;
	return $self unless $self->{_started};

	my $master = $self->{_master};
	my @workers = _children($master);

	kill 'QUIT', $master;

	if (!$self->_wait_master($QUIT_WAIT)) {
		Test::More::diag("nginx did not quit in ${QUIT_WAIT}s "
			. "(client connections left open?), sending TERM; "
			. "expect 'open socket left' alerts");
		kill 'TERM', $master;

		if (!$self->_wait_master($TERM_WAIT)) {
			Test::More::diag("nginx did not exit, KILL");
			push @workers, _children($master);
			kill 'KILL', $master, @workers;
			$self->_wait_master($TERM_WAIT);
		}
	}

	# never leave orphaned workers behind
	my @left = grep { _alive($_) } @workers;
	kill 'KILL', @left if @left;

	$self->{_started} = 0;
	$self->{_child} = undef;

	return $self;
}

sub reload {
	my ($self) = @_;
	return $self unless $self->{_started};

	my $d = $self->{_testdir};
	my $master = $self->{_master};
	my %old = map { $_ => 1 } _children($master);
	my $off = -s "$d/error.log" || 0;

	kill 'HUP', $master or die "Can't send HUP to nginx $master: $!\n";

	my $deadline = time() + $RELOAD_WAIT;

	while (time() <= $deadline) {
		select(undef, undef, undef, 0.05);

		my $log = $self->_slurp("$d/error.log", $off);
		$log = '' unless defined $log;

		if ($log =~ /^.*\[emerg\].*$/m) {
			Test::More::diag("reload failed, old config kept: $&");
			return $self;
		}

		if (!%old) {
			# master_process off, or no /proc: no workers to watch
			next unless $log =~ /reconfiguring/;
			select(undef, undef, undef, 0.2);
			return $self;
		}

		next unless grep { !$old{$_} } _children($master);

		# old workers close their listeners right after logging this
		my @busy = grep {
			_alive($_) && $log !~ /\b$_#\d+: (?:gracefully shutting down|exiting)/
		} keys %old;

		next if @busy;

		select(undef, undef, undef, 0.05);
		return $self;
	}

	Test::More::diag("reload: new workers not confirmed in ${RELOAD_WAIT}s");
	return $self;
}

###############################################################################
# helper processes

sub run_daemon {
	my ($self, $code, @args) = @_;

	my $pid = fork();
	die "Can't fork daemon: $!\n" unless defined $pid;

	if ($pid == 0) {
		$SIG{$_} = 'DEFAULT' for qw/ INT TERM /;
		if (ref $code eq 'CODE') {
			eval { $code->(@args); };
			print STDERR "daemon died: $@" if $@;
			_exit($@ ? 1 : 0);
		}
		no warnings "exec";
		exec { $code } $code, @args;
		print STDERR "Can't exec $code: $!\n";
		_exit(127);
	}

	push @{ $self->{_daemons} }, $pid;
	return $self;
}

sub stop_daemons {
	my ($self) = @_;

	while (my $pid = shift @{ $self->{_daemons} || [] }) {
		kill 'TERM', $pid;

		my $gone;
		for (1 .. 100) {
			my $r = waitpid($pid, WNOHANG);
			if ($r == $pid || $r == -1) {
				$gone = 1;
				last;
			}
			select(undef, undef, undef, 0.05);
		}

		if (!$gone) {
			kill 'KILL', $pid;
			waitpid($pid, 0);
		}
	}

	return $self;
}

sub waitforfile {
	my ($self, $file, $pid) = @_;
	my $exited;

	for (1 .. 50) {
		return 1 if -e $file;
		return 0 if $exited;
		$exited = waitpid($pid, WNOHANG) != 0 if $pid;
		select(undef, undef, undef, 0.1);
	}

	return undef;
}

sub waitforsocket {
	my ($self, $peer) = @_;

	for (1 .. 50) {
		my $s = IO::Socket::INET->new(
			Proto => 'tcp',
			PeerAddr => $peer,
			Timeout => 1,
		);
		return 1 if $s;
		select(undef, undef, undef, 0.1);
	}

	return undef;
}

###############################################################################
# ports

# Map a nominal port (8080, 8081, ...) to a free loopback port, chosen once
# per process.  A socket of the other protocol stays bound to the chosen
# number for the life of the process: that reserves it against other test
# processes picking the same number (prove -jN) without getting in the way
# of nginx binding it.  Candidates come from 10000-29999, below the
# kernel's ephemeral range, so client connections do not take them either.

sub port {
	my ($num, %opts) = @_;

	if (!$ports{$num}) {
		my ($proto, $lock_proto) = $opts{udp} ? ('udp', 'tcp')
			: ('tcp', 'udp');
		my ($port, $lock);

		for (1 .. 100) {
			$port = 10000 + int(rand(20000));

			$lock = IO::Socket::INET->new(
				Proto => $lock_proto,
				LocalAddr => "127.0.0.1:$port",
			) or next;

			my $probe = IO::Socket::INET->new(
				Proto => $proto,
				LocalAddr => "127.0.0.1:$port",
				($proto eq 'tcp' ? (Listen => 1, ReuseAddr => 1)
					: ()),
			);
			last if $probe;
			undef $lock;
		}

		die "Can't find a free port for $num\n" unless $lock;
		$ports{$num} = { port => $port, lock => $lock };
	}

	return $ports{$num}{lock} if $opts{socket};
	return $ports{$num}{port};
}

###############################################################################
# logging

sub log_core {
	return unless $ENV{TEST_NGINX_VERBOSE};
	my ($prefix, $msg) = @_;
	($prefix, $msg) = ('', $prefix) unless defined $msg;
	return unless defined $msg;

	my $len = length $msg;
	$msg = substr($msg, 0, 2048) . "(...logged only 2048 of $len bytes)"
		if $len > 2048;

	$msg =~ s/([^\x20-\x7e\n])/sprintf('\\x%02x', ord $1)/ge;
	$msg =~ s/\n/\\x0a\n/g;
	$prefix .= ' ' if length $prefix;
	$msg =~ s/^/$prefix/gm;

	Test::More->builder->note($msg);
}

sub log_out { log_core('>>', @_); }
sub log_in { log_core('<<', @_); }

###############################################################################
# HTTP client

sub http_get {
	my ($uri, %extra) = @_;
	return http("GET $uri HTTP/1.0\nHost: localhost\n\n", %extra);
}

sub http_head {
	my ($uri, %extra) = @_;
	return http("HEAD $uri HTTP/1.0\nHost: localhost\n\n", %extra);
}

sub http {
	my ($request, %extra) = @_;

	my $s = http_start($request, %extra);
	return $s if $extra{start} || !defined $s || !ref $s;
	return http_end($s, %extra);
}

# run $code with an alarm; returns undef (and logs) on failure
sub _timed {
	my ($code) = @_;
	my $r;

	my $ok = eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		local $SIG{PIPE} = sub { die "sigpipe\n" };
		alarm($IO_TIMEOUT);
		$r = $code->();
		alarm(0);
		1;
	};
	alarm(0);

	if (!$ok) {
		log_in("died: $@");
		return (0, undef);
	}
	return (1, $r);
}

sub http_start {
	my ($request, %extra) = @_;

	# IO::Socket options are capitalised; SSL* are for IO::Socket::SSL
	my %sockopt = map { $_ => $extra{$_} }
		grep { /^[A-Z]/ && !/^SSL/ } keys %extra;

	my (undef, $s) = _timed(sub {
		my $s = $extra{socket} || IO::Socket::INET->new(
			Proto => 'tcp',
			PeerAddr => '127.0.0.1:' . port($extra{SSL} ? 8443 : 8080),
			%sockopt,
		) or die "Can't connect to nginx: $@\n";

		if ($extra{SSL}) {
			require IO::Socket::SSL;
			IO::Socket::SSL->start_SSL($s,
				SSL_verify_mode => 0,
				map { $_ => $extra{$_} } grep { /^SSL_/ } keys %extra,
			) or die(_ssl_error() . "\n");
		}

		log_out($request);
		$s->print($request);

		select(undef, undef, undef, $extra{sleep}) if $extra{sleep};
		return '' if $extra{aborted};

		if (defined $extra{body} && length $extra{body}) {
			log_out($extra{body});
			$s->print($extra{body});
		}

		return $s;
	});

	return $s;
}

sub _ssl_error {
	no warnings 'once';
	return $IO::Socket::SSL::SSL_ERROR;
}

sub http_end {
	my ($s) = @_;

	my (undef, $reply) = _timed(sub {
		my $buf = '';
		while (1) {
			my $n = sysread($s, $buf, 65536, length $buf);
			next if !defined $n && $! == EINTR;
			last if defined $n && $n == 0;
			if (!defined $n) {
				# reset: the peer is gone, keep what we got
				last if $! == ECONNRESET;
				die "read: $!\n";
			}
		}
		$s->close();
		return $buf;
	});

	log_in($reply) if defined $reply;
	return $reply;
}

sub http_content {
	my ($text) = @_;
	return undef unless defined $text;

	my ($headers, $body) = $text =~ /^(.*?)\x0d?\x0a\x0d?\x0a(.*)$/s
		or return undef;

	return $body unless $headers =~ /^Transfer-Encoding:\s*chunked/mi;

	my ($content, $len) = ('', -1);
	while ($body =~ /\G\x0d?\x0a?([0-9a-f]+)[^\x0a]*\x0a/gci) {
		$len = hex $1;
		$content .= substr($body, pos($body), $len);
		pos($body) += $len;
	}
	$content .= '[no-last-chunk]' if $len != 0;

	return $content;
}

1;

__END__

=head1 NAME

Test::Nginx - small nginx-tests compatible harness for crawlward

=head1 SYNOPSIS

    use Test::Nginx;          # found via: prove -I t/lib

    my $t = Test::Nginx->new()->has(qw/http rewrite/)->plan(2);
    $t->write_file_expand('nginx.conf', $conf)->run();
    like(http_get('/'), qr/200 OK/, 'get');

=head1 DIFFERENCES FROM nginx-tests' Test::Nginx

=over

=item * TEST_NGINX_BINARY defaults to F</usr/sbin/nginx>, not
F<../nginx/objs/nginx>.

=item * port() picks random ports in 10000-29999 instead of trying the
nominal number first.

=item * A dynamic module (stream, mail, perl, ...) counts for has() only when
TEST_NGINX_GLOBALS loads it or its .so is in TEST_NGINX_MODULES (default:
the binary's directory); only existing .so files are auto-loaded.

=item * run() falls back to the pid file and /proc, so configs without
C<daemon off;> work too; failures die with the new part of error.log.
stop() escalates QUIT (20s), TERM (5s), KILL instead of waiting 90s.
reload() waits (up to 10s) until new workers run and the old ones stopped
accepting; upstream returns right after HUP.

=item * http() reads with sysread; a reset after the request counts as the
end of the reply, so C<return 444> gives '' either way.

=item * No gzip helpers (http_gzip_request, http_gzip_like), no
TEST_NGINX_UNSAFE, no PERL5LIB setup for the perl module, no Windows or
Solaris special cases.

=item * SIGINT/SIGTERM are turned into die() so DESTROY still cleans up.

=back

=cut
