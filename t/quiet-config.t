# What crawlward render writes passes nginx -t with no warning at all (a sysadmin reads any [warn] as something wrong): the example policies, the test policies, 700 agents with a published list each, and, with ngx_http_crawlward_module loaded, the policies for the module (the Debian package's starter policy among them) and a stock-rendered policy that names the module's variables in a map, a geo and a set; and the module, loaded, makes room in nginx's variables hash for a site with many maps of its own, whatever variables_hash_max_size the site sets.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $T_WAIT = 20;	# seconds one nginx -t may take

my $t = Test::Nginx->new()->has(qw/http realip map geo limit_req limit_conn/);

my $module = ($ENV{TEST_NGINX_GLOBALS} // '') =~ /ngx_http_crawlward_module/;

# 700 agents, each with a list of its own: with one geo block per list, nginx -t
# warned "could not build optimal variables_hash" past a dozen lists
sub many_agents {
	my ($t, $name, $extra) = @_;
	my $yaml = "site: {canonical_url: https://example.org, upstream_workers: 8}\n"
		. "install:\n  dir: /etc/nginx/crawlward-$name\n"
		. "  throttle_log: /var/log/nginx/$name-throttled.log\n"
		. "robots: {}\n$extra"
		. "catalogue:\n  agents:\n";
	for my $i (1 .. 700) {
		my $net = sprintf('10.%d.%d.0/24', int($i / 256), $i % 256);
		$yaml .= "    - {name: Synthbot$i, operator: bench, purpose: seo, "
			. "ua: 'Synth${i}Crawler', ranges: [$net], source: test}\n";
	}
	$t->write_file("$name.yaml", $yaml);
	return $t->testdir() . "/$name.yaml";
}

# a stock-rendered policy alongside a map, a geo and a set of the module's own
# variable names: loading the module must not break a configuration that
# worked without it
my %extra = (
	'nginx-conf/catalogue.yaml' => [
		"map \$uri \$crawlward_operator { default x; }\n"
		. "    geo \$crawlward_dns { default y; }",
		'set $crawlward_budget z;'
	],
);

my @policies = (
	'nginx-conf/catalogue.yaml',
	'nginx-conf/forge.yaml',
	't/policies/verified.yaml',
	many_agents($t, 'many', ''),
);
push @policies, (
	'debian/policy.yaml',
	map({ "t/policies/$_.yaml" } qw/ module module-limits budget protect dns
		dns-hostile extra-agent /),
	many_agents($t, 'many-module', "module: {status: /crawlward-status}\n"),
) if $module;

# a site's own maps, enough of them that nginx's default variables_hash_max_size
# no longer holds every variable: the module, loaded, makes room
my $SITE_MAPS = 100;
$t->write_file('site-maps.conf', join '', map {
	sprintf "map \$uri \$site_variable_%05d { default \"\"; }\n", $_ } 1 .. $SITE_MAPS);

$t->plan(3 * @policies + ($module ? 5 : 0));

###############################################################################

# nginx -t on <name>.conf: (exit status, everything nginx printed); $t is
# passed, not closed over, so that it is destroyed at the end of the test
sub nginx_t {
	my ($t, $file, $http, $server) = @_;
	my $d = $t->testdir();

	$t->write_file_expand($file, <<"EOF");

%%TEST_GLOBALS%%

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    resolver 127.0.0.1:%%PORT_8053_UDP%%;

    $http

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        $server

        location / {
            return 204;
        }
    }
}

EOF

	my @cmd = ($Test::Nginx::NGINX, '-t', '-p', "$d/", '-c', "$d/$file",
		'-e', "$d/t.log");
	my ($status, $out) = run_bounded($T_WAIT, @cmd);
	return $status == -1 ? (-1, $out) : ($status >> 8, $out);
}

my $n = 0;

for my $p (@policies) {
	my $dir = render($t, $p);
	my ($http, $server) = @{ $extra{$p} // ['', ''] };
	(my $name = $p) =~ s!.*/!!;
	my ($rc, $out) = nginx_t($t, 'quiet-' . ++$n . '.conf',
		"include $dir/crawlward-http.conf;\n    $http",
		"include $dir/crawlward-server.conf;\n        $server");

	is($rc, 0, "$name: nginx -t passes") or diag($out);
	my @said = grep { /\[(warn|alert|crit|emerg)\]/ } split /\n/, $out;
	is(join("\n", @said), '', "$name: nginx -t says nothing but ok");
	like($out, qr/test is successful/, "$name: nginx -t says the test is successful");
}

if ($module) {
	my $d = $t->testdir();
	my $maps = "include $d/site-maps.conf;";

	# without the module (no TEST_GLOBALS, so no load_module): nginx's own default
	$t->write_file('no-module.conf', "pid $d/no-module.pid;\nevents {}\n"
		. "http {\n    $maps\n}\n");
	my ($rc, $out) = run_bounded($T_WAIT, $Test::Nginx::NGINX, '-t', '-p', "$d/",
		'-e', "$d/no-module.log", '-c', "$d/no-module.conf");
	like($out, qr/\[warn\] could not build optimal variables_hash/,
		"$SITE_MAPS maps of a site's own, without the module: nginx -t warns");

	($rc, $out) = nginx_t($t, 'site-maps.conf.t', $maps, '');
	is($rc, 0, "the same with the module loaded: nginx -t passes");
	is(join("\n", grep { /\[(warn|alert|crit|emerg)\]/ } split /\n/, $out), '',
		'and says nothing but ok: the module raised variables_hash_max_size');

	# the sysadmin's own setting: no duplicate, a lower one raised, a higher one kept
	($rc, $out) = nginx_t($t, 'lower.conf', "variables_hash_max_size 512;\n    $maps", '');
	is(join("\n", grep { /\[(warn|alert|crit|emerg)\]/ } split /\n/, $out) . " rc=$rc", ' rc=0',
		'variables_hash_max_size 512 in the configuration: quiet, raised');
	($rc, $out) = nginx_t($t, 'higher.conf', "variables_hash_max_size 8192;\n    $maps", '');
	is(join("\n", grep { /\[(warn|alert|crit|emerg)\]/ } split /\n/, $out) . " rc=$rc", ' rc=0',
		'variables_hash_max_size 8192 in the configuration: quiet, kept');
}

###############################################################################
