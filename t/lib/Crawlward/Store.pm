package Crawlward::Store;

# redis-server for the budget sync suites: started on 127.0.0.1 on the given
# port, nothing saved, its log in the test's directory; stopped by stop() or,
# however the test ends, when the object goes away.
#
#   my $store = Crawlward::Store->new($dir, $port);
#   kill 'STOP', $store->pid;                # a store that hangs
#   $store->stop; $store->start;             # an outage and a return
#
# and what a node's status endpoint says of a synced zone:
#
#   zone_sync(8080, 'budgets', 'cluster')    # its "sync" object ({} if none)
#   wait_zone_state([8080, 8081], 'budgets', 'cluster', 'synced', 5)

use warnings;
use strict;

use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw/ sleep time /;

use Crawlward::Test qw/ module_status /;

use Exporter qw/ import /;
our @EXPORT_OK = qw/ zone_sync wait_zone_state wait_zone_owner /;

our $SERVER = '/usr/bin/redis-server';

sub new {
	my ($class, $dir, $port) = @_;
	my $self = bless { dir => $dir, port => $port, pid => undef }, $class;
	$self->start();
	return $self;
}

sub pid { $_[0]{pid} }

sub start {
	my ($self) = @_;
	my $pid = fork();
	die "can't fork: $!\n" unless defined $pid;
	if ($pid == 0) {
		open(STDOUT, '>', "$self->{dir}/redis.log");
		open(STDERR, '>&', \*STDOUT);
		{ exec($SERVER, '--bind', '127.0.0.1', '--port', $self->{port},
			'--save', '', '--appendonly', 'no', '--dir', $self->{dir}); }
		POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	for (1 .. 100) {
		last if IO::Socket::INET->new(PeerAddr => "127.0.0.1:$self->{port}");
		sleep(0.05);
	}
}

sub stop {
	my ($self) = @_;
	return unless $self->{pid};
	local $?;
	kill 'CONT', $self->{pid};
	kill 'TERM', $self->{pid};
	waitpid($self->{pid}, 0);
	undef $self->{pid};
}

sub DESTROY { $_[0]->stop(); }

# the "sync" object of zone $zone in the status section $section ('budgets'
# or 'quotas') of the node on nominal port $port; {} when it has none
sub zone_sync {
	my ($port, $section, $zone) = @_;
	my $st = module_status('/crawlward-status', port => $port) or return {};
	my ($z) = grep { $_->{zone}{name} eq $zone } @{ $st->{$section} || [] };
	return $z ? $z->{sync} || {} : {};
}

# wait up to $secs until the owner of the zone's sync on the node on nominal
# port $port (its pid) passes $test
sub wait_zone_owner {
	my ($port, $section, $zone, $test, $secs) = @_;
	my $deadline = time() + $secs;
	while (time() < $deadline) {
		my $o = zone_sync($port, $section, $zone)->{owner_pid};
		return 1 if $o && $test->($o);
		sleep(0.05);
	}
	return 0;
}

# wait up to $secs until every node of @$ports says $state for the zone
sub wait_zone_state {
	my ($ports, $section, $zone, $state, $secs) = @_;
	my $deadline = time() + $secs;
	while (time() < $deadline) {
		return 1 unless grep { (zone_sync($_, $section, $zone)->{state} // '') ne $state } @$ports;
		sleep(0.05);
	}
	return 0;
}

1;
