#!/usr/bin/perl

# Budget sync (crawlward_budget_zone sync=) is a worker's job: with a cache
# configured, nginx's cache manager and cache loader call the module's
# init_process too, and neither may take the zone's sync. The loader exits
# without giving a claim back, so a claim of its own would stall the sync
# until the lease ran out; the manager would keep it. Here the only worker is
# stopped for several leases: the helpers must leave the sync alone, and the
# worker, woken, is its owner again.

use warnings;
use strict;

use Test::More;

use Time::HiRes qw/ time sleep /;

use Test::Nginx qw/ port /;
use Crawlward::Test;
use Crawlward::Store qw/ zone_sync wait_zone_owner /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $REDIS = $Crawlward::Store::SERVER;
plan(skip_all => "no $REDIS (ci/setup installs redis-server)") unless -x $REDIS;

my $t = Test::Nginx->new()->has(qw/http proxy cache realip map limit_conn limit_req/)
	->plan(6);

my $dir = render($t, 't/policies/budget.yaml');
my $d = $t->testdir();
write_page($t);

my $store_port = port(8082);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;
worker_processes 1;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    proxy_cache_path $d/cache keys_zone=pages:1m;

    crawlward_budget_zone zone=cluster:1m sync=valkey://127.0.0.1:$store_port/3 nodes=2 sync_interval=50ms sync_timeout=300ms;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            crawlward_budget zone=cluster address=60r/m,6r/m agent=1000r/m,1000r/m shared=1000r/m,1000r/m;
            proxy_cache pages;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

my $store = Crawlward::Store->new($d, $store_port);
$t->run();

###############################################################################

# (named subs use $d, not $t: a sub holding $t would keep it alive past
# Test::More's count of the tests, and its DESTROY's tests with it)

# the master's children by their titles: "worker process", "cache manager process", ...
sub children {
	open(my $pf, '<', "$d/nginx.pid") or return {};
	my $master = <$pf>;
	close $pf;
	chomp $master;
	my %by;
	for my $stat (glob('/proc/[0-9]*/stat')) {
		open(my $fh, '<', $stat) or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line && $line =~ /^(\d+) \(.*\) \S (\d+) /;
		my ($pid, $ppid) = ($1, $2);
		next unless $ppid == $master;
		open(my $ch, '<', "/proc/$pid/cmdline") or next;
		my $title = do { local $/; <$ch> } // '';
		close $ch;
		$title =~ s/\0+$//;
		push @{ $by{$title} }, $pid;
	}
	return \%by;
}

sub owner { return zone_sync(8080, 'budgets', 'cluster')->{owner_pid} // 0; }

sub wait_owner {
	my ($want, $secs) = @_;
	return wait_zone_owner(8080, 'budgets', 'cluster', sub { $_[0] == $want }, $secs);
}

# the children take their titles once every module's init_process has run: wait for them
my ($worker, @helpers);
for (1 .. 200) {
	my $by = children();
	($worker) = @{ $by->{'nginx: worker process'} || [] };
	@helpers = map { @{ $by->{$_} } } grep { /cache (manager|loader)/ } keys %$by;
	last if $worker && @helpers == 2;
	sleep(0.05);
}

ok($worker, 'the worker is running');
is(scalar(@helpers), 2, 'and the cache manager and the cache loader');

SKIP: {
skip('no worker found', 4) unless $worker;

ok(wait_owner($worker, 10), 'the worker owns the sync');

# the worker stopped for ten leases (3 intervals and the timeout: 450 ms)
kill 'STOP', $worker;
sleep(4.5);
my @alive = grep { kill 0, $_ } @helpers;
kill 'CONT', $worker;

ok(scalar(@alive) >= 1, 'a helper was running while the worker was stopped');
ok(wait_owner($worker, 10), 'the worker owns the sync again')
	or diag('owner: ' . owner() . "; helpers: @helpers");
my %helper = map { $_ => 1 } @helpers;
ok(!$helper{ owner() }, 'no helper took it');

}

###############################################################################
