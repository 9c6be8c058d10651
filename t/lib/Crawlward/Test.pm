package Crawlward::Test;

# Shared helpers for crawlward's nginx tests: render a policy into the test
# directory, send requests with a chosen User-Agent / Referer /
# X-Forwarded-For / client address, pick replies apart, read the throttle
# log.  Works with crawlward's t/lib/Test/Nginx.pm and with nginx-tests'
# lib/Test/Nginx.pm: it only uses http(), port() and $t->testdir().

use warnings;
use strict;

use base qw/ Exporter /;

our @EXPORT = qw/
	run_bounded
	repo_root crawlward_bin render throttle_log flag_file access_log
	rendered_file
	get status header body log_lines wait_log write_page
	error_log_lines wait_error_log module_status module_count
	browse_in_flight wait_for
	worker_pids reload_workers outcome outcomes
	file_lines wait_file_lines start_node
	BROWSER PAGE SELF_DECLARED_BOT
/;

use Cwd qw/ abs_path /;
use File::Basename qw/ dirname /;
use File::Path qw/ make_path /;
use IO::Socket::INET;
use POSIX qw/ _exit /;
use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ http port /;

# A current desktop Chrome: the "person" of these tests.
use constant BROWSER => 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) '
	. 'AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 '
	. 'Safari/537.36';

# The body of the page the tests' content-phase location serves.
use constant PAGE => "crawlward test page\n";
use constant SELF_DECLARED_BOT => 'Mozilla/5.0 (compatible; Rivetbot/1.0)';

my $RENDER_WAIT = 60;	# seconds crawlward render may take

# what render() learnt, per test directory
my %RENDERED;

###############################################################################
# where things are

# The repository root: this file is <repo>/t/lib/Crawlward/Test.pm.
sub repo_root {
	my $here = abs_path(__FILE__)
		or die "Crawlward::Test: can't resolve " . __FILE__ . "\n";
	return abs_path(dirname($here) . '/../../..');
}

# The crawlward binary: $CRAWLWARD_BIN, or <repo>/target/debug/crawlward.
sub crawlward_bin {
	my $bin = $ENV{CRAWLWARD_BIN};
	$bin = repo_root() . '/target/debug/crawlward'
		unless defined $bin && length $bin;

	die "Crawlward::Test: crawlward binary $bin is not executable; "
		. "build it with `cargo build` or set CRAWLWARD_BIN\n"
		unless -f $bin && -x _;

	return $bin;
}

###############################################################################
# rendering

# render($t, 'nginx-conf/catalogue.yaml'): renders the policy (a path
# relative to the repository, or absolute) into <testdir><install.dir> with
# --root <testdir>, creates the directories nginx writes to or looks in (the
# throttle log's, the maintenance flag file's) and returns the install dir.
# Published ranges come from t/ranges/: every operator's crawlers are at
# 127.0.0.2, so a real crawler is sent from there and an impostor from
# anywhere else. crawlward refuses a range file with a loopback network
# outside the test suites' mode, which this sets for every command a test runs.

$ENV{CRAWLWARD_TEST_RANGES} = 1;

sub render {
	my ($t, $policy) = @_;

	my $d = $t->testdir();
	my $file = $policy =~ m!^/! ? $policy : repo_root() . "/$policy";
	die "Crawlward::Test: no policy $file\n" unless -f $file;
	$file = _with_module($t, $file) if $ENV{CRAWLWARD_TEST_RENDER_MODULE};

	my $p = _policy_paths($file);
	my $dir = $d . $p->{dir};

	my @cmd = (crawlward_bin(), 'render', $file,
		'--out', $dir, '--root', $d, '--ranges-dir', repo_root() . '/t/ranges');
	my ($status, $out) = _run(@cmd);
	die "Crawlward::Test: `@cmd` failed (status $status):\n$out\n"
		if $status != 0;

	for my $f (qw/ crawlward-http.conf crawlward-server.conf
		crawlward-limits.conf robots.txt /)
	{
		die "Crawlward::Test: `@cmd` did not write $dir/$f:\n$out\n"
			unless -f "$dir/$f";
	}

	my %info = (
		dir => $dir,
		throttle_log => $d . $p->{throttle_log},
		flag_file => defined $p->{flag_file} ? $d . $p->{flag_file}
			: undef,
		access_log => defined $p->{access_log} ? $d . $p->{access_log}
			: undef,
	);

	# the rendered snippets must point where the policy says, under --root
	my $limits = _slurp("$dir/crawlward-limits.conf");
	die "Crawlward::Test: $dir/crawlward-limits.conf does not log to "
		. "$info{throttle_log}\n"
		unless $limits =~ /^\s*access_log\s+\Q$info{throttle_log}\E\s/m;

	if (defined $info{flag_file}) {
		my $server = _slurp("$dir/crawlward-server.conf");
		die "Crawlward::Test: $dir/crawlward-server.conf does not test "
			. "$info{flag_file}\n"
			unless $server =~ /-f\s+\Q$info{flag_file}\E\s*\)/;
	}

	make_path(dirname($info{throttle_log}));
	make_path(dirname($info{flag_file})) if defined $info{flag_file};
	make_path(dirname($info{access_log})) if defined $info{access_log};

	$RENDERED{$d} = \%info;
	return $dir;
}

# With CRAWLWARD_TEST_RENDER_MODULE set (and the module loaded), a policy
# without a module section is rendered with `module: {}`: the stock suites
# then show that what the module decides for nginx's limits (the rate
# classes, the browse cap, Retry-After, the throttle log) answers with the
# same statuses, headers and log lines as the maps rendered for stock nginx.
sub _with_module {
	my ($t, $file) = @_;
	my $text = _slurp($file);
	return $file if $text =~ /^module:/m;
	(my $name = $file) =~ s!.*/!!;
	my $copy = $t->testdir() . "/$name";
	open my $fh, '>', $copy or die "Crawlward::Test: can't write $copy: $!\n";
	print $fh $text, "\nmodule: {}\n";
	close $fh;
	return $copy;
}

sub _info {
	my ($t) = @_;
	my $i = $RENDERED{$t->testdir()}
		or die "Crawlward::Test: render() was not called\n";
	return $i;
}

# <testdir><install.throttle_log>
sub throttle_log { return _info($_[0])->{throttle_log}; }

# <testdir><maintenance.flag_file>, undef without maintenance
sub flag_file { return _info($_[0])->{flag_file}; }

# <testdir><install.access_log>, undef without one
sub access_log { return _info($_[0])->{access_log}; }

# the content of one rendered file, e.g. robots.txt
sub rendered_file {
	my ($t, $name) = @_;
	my $c = _slurp(_info($t)->{dir} . "/$name");
	die "Crawlward::Test: can't read rendered $name\n" unless defined $c;
	return $c;
}

# install.dir, install.throttle_log and maintenance.flag_file of a policy,
# read line by line (the policies keep these as plain scalars), with
# crawlward's defaults

sub _policy_paths {
	my ($file) = @_;

	my %p = (
		dir => '/etc/nginx/crawlward',
		throttle_log => '/var/log/nginx/crawlward-throttled.log',
		flag_file => undef,
		access_log => undef,
	);

	open(my $fh, '<', $file) or die "Crawlward::Test: $file: $!\n";
	my $section = '';

	while (my $line = <$fh>) {
		next if $line =~ /^\s*(?:#.*)?$/;

		if ($line =~ /^([A-Za-z_][\w-]*)\s*:/) {
			$section = $1;
			next;
		}

		next unless $line =~ /^\s+([A-Za-z_]\w*)\s*:\s*(.*?)\s*$/;
		my ($key, $value) = ($1, $2);
		$value =~ s/\s+#.*$//;
		$value =~ s/^(["'])(.*)\1$/$2/;

		if ($section eq 'install' && $key =~ /^(dir|throttle_log|access_log)$/) {
			$p{$key} = $value;
		} elsif ($section eq 'maintenance' && $key eq 'flag_file') {
			$p{flag_file} = $value;
		}
	}

	close $fh;
	return \%p;
}

# run_bounded($seconds, @cmd): runs a command with stdout and stderr together;
# returns (its wait status, its output), or (-1, a message) when it did not
# finish in time (it is then killed)
sub run_bounded {
	my ($seconds, @cmd) = @_;

	my $pid = open(my $fh, '-|');
	die "Crawlward::Test: can't fork: $!\n" unless defined $pid;

	if ($pid == 0) {
		open(STDERR, '>&', \*STDOUT);
		open(STDIN, '<', '/dev/null');
		no warnings 'exec';
		exec { $cmd[0] } @cmd;
		print "can't exec $cmd[0]: $!\n";
		_exit(127);
	}

	my $out = '';
	my $ok = eval {
		local $SIG{ALRM} = sub { die "timeout\n" };
		alarm($seconds);
		local $/;
		$out = <$fh>;
		alarm(0);
		1;
	};
	alarm(0);

	if (!$ok) {
		kill 'KILL', $pid;
		close $fh;
		return (-1, "`@cmd` did not finish in ${seconds}s");
	}

	close $fh;
	return ($?, defined $out ? $out : '');
}

# run a crawlward command; bounded by $RENDER_WAIT
sub _run {
	my (@cmd) = @_;
	my ($status, $out) = run_bounded($RENDER_WAIT, @cmd);
	die "Crawlward::Test: $out\n" if $status == -1;
	return ($status, $out);
}

###############################################################################
# requests

# get($uri, ua => $ua, %opts): a GET to the test server, the raw reply.
#
#   ua       User-Agent value; required, so that a forgotten one does not
#            quietly become "no User-Agent": undef sends no header, ''
#            sends an empty "User-Agent:" header
#   referer  Referer value
#   host     Host value, default localhost
#   xff      X-Forwarded-For value
#   headers  more header lines, an array ref of "Name: value"
#   from     client source address (127.0.0.2, ...), bound before connect
#   start    1: return the socket after sending (finish with http_end)
#   port     nominal port, default 8080
#   addr     server address to connect to, default 127.0.0.1; an IPv6
#            one ('::1') connects with IO::Socket::IP
#
# A 444 (closed without a reply) gives ''.

sub get {
	my ($uri, %o) = @_;

	die "Crawlward::Test::get: say ua => undef for no User-Agent\n"
		unless exists $o{ua};

	my $req = "GET $uri HTTP/1.0\x0d\x0aHost: " . ($o{host} // 'localhost')
		. "\x0d\x0a";
	$req .= "User-Agent: $o{ua}\x0d\x0a" if defined $o{ua};
	$req .= "Referer: $o{referer}\x0d\x0a" if defined $o{referer};
	$req .= "X-Forwarded-For: $o{xff}\x0d\x0a" if defined $o{xff};
	$req .= "$_\x0d\x0a" for @{ $o{headers} || [] };
	$req .= "\x0d\x0a";

	my %extra;
	$extra{start} = 1 if $o{start};

	if (defined $o{addr} && $o{addr} =~ /:/) {
		require IO::Socket::IP;
		my $port = port($o{port} || 8080);
		my $s = IO::Socket::IP->new(
			Proto => 'tcp',
			PeerHost => $o{addr},
			PeerPort => $port,
			(defined $o{from} ? (LocalHost => $o{from}) : ()),
			Timeout => 5,
		) or die "Crawlward::Test: can't connect to [$o{addr}]:$port"
			. (defined $o{from} ? " from $o{from}" : '')
			. ": $IO::Socket::errstr\n";
		$extra{socket} = $s;

	} elsif (defined $o{from} || defined $o{port} || defined $o{addr}) {
		my $peer = ($o{addr} // '127.0.0.1') . ':'
			. port($o{port} || 8080);
		my $s = IO::Socket::INET->new(
			Proto => 'tcp',
			PeerAddr => $peer,
			(defined $o{from} ? (LocalAddr => $o{from}) : ()),
			Timeout => 5,
		) or die "Crawlward::Test: can't connect to $peer"
			. (defined $o{from} ? " from $o{from}" : '') . ": $@\n";
		$extra{socket} = $s;
	}

	return http($req, %extra);
}

# "429" from a raw reply; undef for '' (444) or garbage
sub status {
	my ($r) = @_;
	return undef unless defined $r;
	return $r =~ m!^HTTP/1\.[01] (\d{3})[ \x0d]! ? $1 : undef;
}

# a header's value (the first), undef if absent
sub header {
	my ($r, $name) = @_;
	return undef unless defined $r;
	my ($head) = $r =~ /^(.*?)\x0d?\x0a\x0d?\x0a/s or return undef;
	return $head =~ /^\Q$name\E:[ \t]*([^\x0d\x0a]*?)[ \t]*\x0d?$/mi
		? $1 : undef;
}

sub body {
	my ($r) = @_;
	return undef unless defined $r;
	return $r =~ /\x0d?\x0a\x0d?\x0a(.*)\z/s ? $1 : undef;
}

# <testdir>/www/page.html: the page "location /" serves from the content
# phase (try_files), so that limit_req and limit_conn do run
sub write_page {
	my ($t) = @_;
	make_path($t->testdir() . '/www');
	$t->write_file('www/page.html', PAGE);
	return $t;
}

###############################################################################
# the throttle log

# all lines of the throttle log ('' if it does not exist yet)
sub log_lines {
	my ($t) = @_;
	my $c = _slurp(throttle_log($t));
	return () unless defined $c;
	return split /\n/, $c;
}

# wait (up to $secs, default 3) until the throttle log has at least $n lines
# matching $re; returns the matching lines.  nginx writes the log line when
# it finalizes the request, which may be just after the client has the reply.
sub wait_log {
	my ($t, $re, $n, $secs) = @_;
	$n = 1 unless defined $n;
	my $deadline = time() + (defined $secs ? $secs : 3);
	my @m;

	while (1) {
		@m = grep { $_ =~ $re } log_lines($t);
		last if @m >= $n || time() > $deadline;
		sleep(0.05);
	}

	return @m;
}

###############################################################################
# ngx_http_crawlward_module's status location

# module_status('/crawlward-status', %get_opts): GET the status location
# (with get()'s options; no User-Agent unless given) and decode its JSON
# with JSON::PP; undef unless the reply is a 200 with a JSON object
sub module_status {
	my ($uri, %o) = @_;
	$o{ua} = undef unless exists $o{ua};

	my $r = get($uri, %o);
	return undef unless (status($r) // 0) == 200;

	require JSON::PP;
	my $v = eval { JSON::PP->new->decode(body($r)) };
	return ref $v eq 'HASH' ? $v : undef;
}

# the browse cap's requests in flight on this node, as the module's status
# at /crawlward-status says (its first budget zone); -1 when it does not
# answer
sub browse_in_flight {
	my $st = module_status('/crawlward-status', @_) or return -1;
	my ($z) = @{ $st->{budgets} || [] };
	return ($z || {})->{browse_cap}{in_flight} // -1;
}

# whether $test->() comes true within $secs seconds (checked every 50 ms)
sub wait_for {
	my ($test, $secs) = @_;
	my $deadline = time() + $secs;
	while (time() < $deadline) {
		return 1 if $test->();
		sleep(0.05);
	}
	return 0;
}

# the count of (agent, verdict, action) in a module_status() hash, 0 if the
# status has no such entry, undef without a status
sub module_count {
	my ($st, $agent, $verdict, $action) = @_;
	return undef unless ref $st eq 'HASH' && ref $st->{requests} eq 'ARRAY';

	my $n = 0;
	for my $e (@{ $st->{requests} }) {
		$n += $e->{count} if $e->{agent} eq $agent
			&& $e->{verdict} eq $verdict && $e->{action} eq $action;
	}
	return $n;
}

###############################################################################
# nginx's error.log

# the lines of <testdir>/error.log matching $re (all lines without one)
sub error_log_lines {
	my ($t, $re) = @_;
	my $c = _slurp($t->testdir() . '/error.log');
	return () unless defined $c;
	my @lines = split /\n/, $c;
	return defined $re ? grep { $_ =~ $re } @lines : @lines;
}

# wait (up to $secs, default 3) until error.log has at least $n lines
# matching $re; returns the matching lines
sub wait_error_log {
	my ($t, $re, $n, $secs) = @_;
	$n = 1 unless defined $n;
	my $deadline = time() + (defined $secs ? $secs : 3);
	my @m;

	while (1) {
		@m = error_log_lines($t, $re);
		last if @m >= $n || time() > $deadline;
		sleep(0.05);
	}

	return @m;
}

###############################################################################
# the crawl budgets' answers

# "429 address-deep": a request's status ("closed" for none) and the
# X-Budget header the test's configuration adds ($crawlward_budget); with
# get()'s options, and a self-declared bot's User-Agent unless ua is given
sub outcome {
	my ($uri, %o) = @_;
	$o{ua} = SELF_DECLARED_BOT unless exists $o{ua};
	my $r = get($uri, %o);
	my $s = status($r) // 'closed';
	my $b = header($r, 'X-Budget') // '';
	return $b ne '' ? "$s $b" : $s;
}

# "200 x6, 429 address-deep x1": the outcomes of $n requests, counted
sub outcomes {
	my ($n, $uri, %o) = @_;
	my %seen;
	$seen{ outcome($uri, %o) }++ for 1 .. $n;
	return join ', ', map { "$_ x$seen{$_}" } sort keys %seen;
}

###############################################################################
# nginx's processes

# the pids of the master's worker processes
sub worker_pids {
	my ($t) = @_;
	my $master = $t->read_file('nginx.pid');
	chomp $master;
	my @pids;
	for my $p (glob '/proc/[0-9]*') {
		open my $fh, '<', "$p/stat" or next;
		my $stat = <$fh>;
		next unless $stat =~ /^(\d+) \(nginx\) \S (\d+)/;
		push @pids, $1 if $2 == $master;
	}
	return @pids;
}

# $t->reload(), then wait (up to 10 s) until every worker is a new one: the
# reload() of nginx-tests' Test::Nginx only signals the master
sub reload_workers {
	my ($t) = @_;
	my %old = map { $_ => 1 } worker_pids($t);
	$t->reload();
	my $deadline = time() + 10;
	while (time() < $deadline) {
		my @now = worker_pids($t);
		return scalar @now if @now && !grep { $old{$_} } @now;
		sleep(0.05);
	}
	return 0;
}

# the lines of a file, without their newlines (none if it does not exist yet)
sub file_lines {
	my ($file) = @_;
	open(my $f, '<', $file) or return ();
	chomp(my @l = <$f>);
	return @l;
}

# wait (up to 5 s) until a file has at least $n lines; nginx writes an access
# log's line when it finalizes the request, just after the client has the reply
sub wait_file_lines {
	my ($file, $n) = @_;
	my $deadline = time() + 5;
	while (time() < $deadline) {
		return 1 if file_lines($file) >= $n;
		sleep(0.05);
	}
	return 0;
}

# start_node($t, $name, $conf, $port): another nginx beside the harness's (a
# second node of a cluster), with the harness's globals (load_module, user),
# its own pid file and error log ($name-error.log in the test directory, at
# debug), stopped with the test; returns once it listens on $port
sub start_node {
	my ($t, $name, $conf, $port) = @_;
	my $d = $t->testdir();
	my $globals = $t->test_globals();
	$globals =~ s/^\s*(pid|error_log)\s[^\n]*\n//mg;
	$t->write_file_expand("$name.conf", "$globals\npid $d/$name.pid;\n"
		. "error_log $d/$name-error.log debug;\n" . $conf);
	$t->run_daemon($Test::Nginx::NGINX, '-p', "$d/", '-c', "$d/$name.conf",
		'-e', "$d/$name-error.log");
	$t->waitforsocket("127.0.0.1:$port") or die "$name did not start\n";
}

sub _slurp {
	my ($path) = @_;
	open(my $fh, '<', $path) or return undef;
	binmode $fh;
	local $/;
	my $c = <$fh>;
	return defined $c ? $c : '';
}

1;
