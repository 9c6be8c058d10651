#!/usr/bin/perl

# crawlward explain against nginx with the module, on the stateful limits:
# each crawl budget (address, agent, shared, verified; general and deep)
# and each rate class in turn at a low limit, the others raised. For every
# client of a fixed set (an unknown bot, a named crawler, a spoofed and a
# verified Googlebot, a browser; on plain, deep, search and machine-door
# paths) explain names the budget that refuses it first and its rate
# class; the test then sends the same request until nginx refuses it, and
# fails unless nginx's refusal is the one explain named, or, where explain
# names no low limit, nginx refuses none of the requests.

use warnings;
use strict;

use Test::More;
use JSON::PP;

use Test::Nginx qw/ http /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $HIGH = '6000000r/m';
my $LOW = '3r/m';
my $LOW_DEEP = '2r/m';

# what each run lowers: budgets by name (with their deep limit), rate
# classes by name, or budgets at different low limits (the smallest
# refuses first)
my @VARIANTS = (
	{ name => 'address budget low', budgets => { address => "$LOW,$LOW_DEEP" } },
	{ name => 'agent budget low', budgets => { agent => "$LOW,$LOW_DEEP" } },
	{ name => 'shared budget low', budgets => { shared => "$LOW,$LOW_DEEP" } },
	{ name => 'verified budget low', budgets => { verified => "$LOW,$LOW_DEEP" } },
	{ name => 'every budget low, agent lowest',
		budgets => { address => '5r/m,5r/m', agent => '3r/m,3r/m',
			shared => '4r/m,4r/m' } },
	{ name => 'default class low', classes => { default => 2 } },
	{ name => 'search class low', classes => { search => 1 } },
	{ name => 'api_v1 class low', classes => { api_v1 => 0 } },
	{ name => 'throttle class low', classes => { throttle => 1 } },
);

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $ARCHIVE = 'Mozilla/5.0 (compatible; archive.org_bot '
	. '+http://archive.org/details/archive.org_bot)';
my $UNKNOWN = 'Mozilla/5.0 (compatible; Rivetbot/1.0; +https://example.net/bot)';

# each from its own address
my @CLIENTS = (
	[ 'an unknown bot', $UNKNOWN, '203.0.113.10', '/record/1' ],
	[ 'an unknown bot on a deep path', $UNKNOWN, '203.0.113.11', '/print/1' ],
	[ 'a named crawler', $ARCHIVE, '203.0.113.12', '/record/2' ],
	[ 'a named crawler, deep', $ARCHIVE, '203.0.113.13', '/export/2' ],
	[ 'a spoofed Googlebot', $GOOGLEBOT, '203.0.113.14', '/record/3' ],
	[ 'a verified Googlebot', $GOOGLEBOT, '192.0.2.15', '/record/4' ],
	[ 'a verified Googlebot, deep', $GOOGLEBOT, '192.0.2.16', '/print/4' ],
	[ 'a browser', BROWSER, '203.0.113.17', '/record/5' ],
	[ 'a browser searching', BROWSER, '203.0.113.18', '/search?q=x' ],
	[ 'an unknown bot on the API', $UNKNOWN, '203.0.113.19', '/api/v1/records' ],
	[ 'an unknown bot searching', $UNKNOWN, '203.0.113.20', '/search?q=y' ],
	[ 'robots.txt', $UNKNOWN, '203.0.113.21', '/robots.txt' ],
);

# enough to pass any low limit above
my $TRIES = 8;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req limit_conn/)
	->plan(2 * @VARIANTS + @VARIANTS * @CLIENTS);

my $d = $t->testdir();
write_page($t);

my $base = do {
	my $f = repo_root() . '/t/policies/differential.yaml';
	open my $fh, '<', $f or die "can't read $f: $!\n";
	local $/;
	<$fh>;
};

# the base policy with one variant's limits; spoofed claims sent to the
# throttle class, so that the budgets, not the bot-blocker, meet them
sub policy_of {
	my ($v) = @_;
	my $p = $base;
	$p =~ s/^  spoofed: block$/  spoofed: throttle/m or die "no spoofed\n";
	my %budgets = (address => "$HIGH,$HIGH", agent => "$HIGH,$HIGH",
		shared => "$HIGH,$HIGH", %{ $v->{budgets} // {} });
	my $cb = "crawl_budget:\n"
		. join('', map { "  $_: $budgets{$_}\n" } sort keys %budgets);
	$p =~ s/^crawl_budget:\n(?:  .*\n)+/$cb/m or die "no crawl_budget\n";
	$p =~ s/^(  retry_after: 60\n)/$1  throttle: {rate: 600000r\/m, burst: 100000}\n/m
		or die "no rate_limits.retry_after\n";
	$p =~ s/^(robots:\n)/$1  deep_paths: [\/print\/, \/export\/]\n/m
		or die "no robots\n";
	for my $class (keys %{ $v->{classes} // {} }) {
		my $burst = $v->{classes}{$class};
		if ($class eq 'throttle') {
			$p =~ s/throttle: \{rate: 600000r\/m, burst: 100000\}/throttle: {rate: 1r\/m, burst: $burst}/
				or die "no throttle\n";
			next;
		}
		$p =~ s/(    - name: $class\n(?:      paths: .*\n)?)      rate: 600000r\/m\n      burst: 100000\n/$1      rate: 1r\/m\n      burst: $burst\n/
			or die "no class $class\n";
	}
	return $p;
}

my $json = JSON::PP->new->canonical;
my $n = 0;

for my $v (@VARIANTS) {
	$n++;
	my $file = "$d/policy-$n.yaml";
	my $p = policy_of($v);
	$p =~ s!^  dir: .*$!  dir: /etc/nginx/crawlward-limits-$n!m;
	$t->write_file("policy-$n.yaml", $p);
	my $dir = render($t, $file);

	# what explain says of each client's first request
	my $requests = join('', map {
		$json->encode({ ua => $_->[1], ip => $_->[2], url => $_->[3] }) . "\n"
	} @CLIENTS);
	$t->write_file("requests-$n.jsonl", $requests);
	my ($status, $out) = run_bounded(60, crawlward_bin(), 'explain', $file,
		'--ranges-dir', repo_root() . '/t/ranges',
		'--requests', "$d/requests-$n.jsonl");
	is($status, 0, "$v->{name}: crawlward explain --requests ran")
		or diag($out);
	my @explained = map { $json->decode($_) } grep { /^\{/ } split /\n/, $out;

	$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        add_header X-Refusal "\$crawlward_refusal" always;
        add_header X-Budget "\$crawlward_budget" always;
        add_header X-Class "\$crawlward_limit_class" always;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

	$t->run();
	is(status(get('/robots.txt', ua => BROWSER, xff => '203.0.113.99')), 200,
		"$v->{name}: nginx runs it");
	$t->stop();

	my %low_budget = map { $_ => 1 } keys %{ $v->{budgets} // {} };
	my %low_class = map { $_ => 1 } keys %{ $v->{classes} // {} };

	for my $i (0 .. $#CLIENTS) {
		my ($what, $ua, $ip, $url) = @{ $CLIENTS[$i] };
		my $e = $explained[$i] // {};

		# the limit explain says refuses this client first, if it is low here
		my $budget = $e->{budget} // '';
		(my $named = $budget) =~ s/-deep$//;
		my $class = $e->{limit_class} // '';
		my $want = $low_budget{$named} ? "budget $budget"
			: $low_class{$class} ? "rate $class"
			: 'none';

		# a fresh nginx, and fresh zones, for each client: the agent, shared
		# and verified budgets are every client's, and explain speaks of a
		# client alone
		$t->run();
		my $got = 'none';
		for (1 .. $TRIES) {
			my $r = get($url, ua => $ua, xff => $ip);
			my $s = status($r) // 'closed';
			next if $s eq '200';
			my $refusal = header($r, 'X-Refusal') // '';
			$got = $refusal eq 'budget' ? 'budget ' . (header($r, 'X-Budget') // '')
				: $refusal eq 'rate' ? 'rate ' . (header($r, 'X-Class') // '')
				: "$s $refusal";
			last;
		}
		is($got, $want, "$v->{name}: $what: nginx refuses as explain says")
			or diag(join("\n", @{ $e->{steps} // [] }));
		$t->stop();
	}
}

###############################################################################
