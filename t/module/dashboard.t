# The monitoring in contrib/ reads what the module says: every metric, and every label, that the Grafana dashboard (contrib/grafana/crawlward.json) and the Prometheus alert rules (contrib/prometheus/crawlward-alerts.yml) query is in the status endpoint's Prometheus text of a running nginx that has seen a verified crawler, a spoofed one, a DNS check, a facet refusal and a budget refusal; and the figures they rest on say what they should (requests by purpose, facet refusals by rule, the ranges' age from update-ranges' last check, read without a reload). With promtool (CRAWLWARD_PROMTOOL), the rules and the dashboard's queries also parse.

use warnings;
use strict;

use Test::More;

use File::Copy qw/ copy /;
use File::Path qw/ make_path /;
use JSON::PP;

use Test::Nginx;
use Crawlward::Test;
use Crawlward::DNS qw/ reverse_name /;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
	. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)';
my $DAY = 86400;

my $t = Test::Nginx->new()->has(qw/http realip map limit_conn/);

my $root = Crawlward::Test::repo_root();
my $d = $t->testdir();
my $dir = render($t, 't/policies/dashboard.yaml');

# rendered again from a copy of t/ranges/, whose files' times the test sets:
# a kept copy's time is when update-ranges last found the list unchanged
make_path("$d/ranges");
opendir(my $rd, "$root/t/ranges") or die "t/ranges: $!\n";
for my $f (grep { /\.json$/ } readdir $rd) {
	copy("$root/t/ranges/$f", "$d/ranges/$f") or die "copy $f: $!\n";
}
closedir $rd;
my $kept = "$d/ranges/developers.google.com_static_crawling_ipranges_common-crawlers.json";
die "no $kept\n" unless -f $kept;
my $month_ago = time() - 30 * $DAY;
utime($month_ago, $month_ago, glob("$d/ranges/*.json"));
my ($rc, $out) = run_bounded(60, Crawlward::Test::crawlward_bin(), 'render',
	"$root/t/policies/dashboard.yaml", '--out', $dir, '--root', $d,
	'--ranges-dir', "$d/ranges");
die "render: $out\n" if $rc != 0;

my @queries = (queries_of_dashboard("$root/contrib/grafana/crawlward.json"),
	queries_of_rules("$root/contrib/prometheus/crawlward-alerts.yml"));

write_page($t);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    resolver 127.0.0.1:%%PORT_8053_UDP%%;
    include $dir/crawlward-http.conf;

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

Crawlward::DNS->start($t, port => port(8053, udp => 1), records => {
	reverse_name('192.0.2.1') => { PTR => 'crawl-192-0-2-1.googlebot.com' },
	'crawl-192-0-2-1.googlebot.com' => { A => '192.0.2.1' },
});

$t->run();

my $promtool = $ENV{CRAWLWARD_PROMTOOL};
$t->plan(2 * @queries + 13 + ($promtool ? 2 : 0));

###############################################################################

# every request kind the dashboard shows
get('/', ua => BROWSER);
get('/', ua => $GPTBOT, xff => '127.0.0.3');		# spoofed: 444
is(status(get('/', ua => $GOOGLEBOT, xff => '127.0.0.2')), 200,
	'Googlebot from its ranges: 200');
is(status(get('/', ua => $GOOGLEBOT, xff => '192.0.2.1')), 200,
	'Googlebot verified by DNS: 200');
get('/', ua => $GOOGLEBOT, xff => '192.0.2.1');		# from the DNS cache
is(status(get('/browse?subjects=1&places=2&a=1&b=2', ua => SELF_DECLARED_BOT,
	xff => '127.0.0.9')), 429, 'a crawler with 4 parameters on a browse page: 429');
my @budget = map { status(get("/page$_", ua => SELF_DECLARED_BOT,
	xff => '127.0.0.10')) // 'none' } 1 .. 4;
is("@budget", '200 200 200 429', 'a crawler past its address budget: 429');

my $p = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';

# no store answers the budget zone's sync: in fallback, as the alert watches
like($p, qr/^crawlward_budget_sync_synced\{zone="[^"]+"\} 0$/m,
	'budget sync without its store: synced 0 (CrawlwardBudgetSyncFallback)');

# metric => { label => 1 }, from the samples; and every metric with a TYPE line
my (%labels, %typed);
for my $line (split /\n/, $p) {
	if ($line =~ /^# TYPE (\S+) /) {
		$typed{$1} = 1;
	} elsif ($line =~ /^([a-z_]+)(?:\{([^}]*)\})? \S+$/) {
		my ($name, $l) = ($1, $2 // '');
		$labels{$name} //= {};
		$labels{$name}{$_} = 1 for $l =~ /(\w+)="/g;
	}
}

# labels Prometheus adds when it scrapes
my %SCRAPE = (instance => 1, job => 1);

for my $q (@queries) {
	my ($where, $expr) = @$q;
	my %seen;
	my @metrics = grep { !$seen{$_}++ } $expr =~ /\b(crawlward_[a-z_]+)\b/g;
	my @missing = grep { !$typed{$_} || !$labels{$_} } @metrics;
	is("@missing", '', "$where: every metric it reads has samples (@metrics)");

	# labels in selectors belong to their metric; labels of by (...) to every metric read
	my @wrong;
	while ($expr =~ /\b(crawlward_[a-z_]+)\{([^}]*)\}/g) {
		my ($m, $sel) = ($1, $2);
		for my $l ($sel =~ /(\w+)\s*(?:=~|!~|!=|=)/g) {
			push @wrong, "$m\{$l}" unless $SCRAPE{$l} || $labels{$m}{$l};
		}
	}
	while ($expr =~ /\bby\s*\(([^)]*)\)/g) {
		for my $l (split /\s*,\s*/, $1) {
			next if $SCRAPE{$l};
			push @wrong, map { "$_ by $l" } grep { !$labels{$_}{$l} } @metrics;
		}
	}
	is("@wrong", '', "$where: every label it reads is there");
}

# the figures behind the panels
like($p, qr/^crawlward_requests_total\{agent="GPTBot",verdict="spoofed",action="block-444",purpose="ai-training"\} 1$/m,
	'requests carry the purpose of their agent');
like($p, qr/^crawlward_requests_total\{agent="-",verdict="none",action="allow",purpose="none"\} \d+$/m,
	'requests that name no agent: purpose none');
like($p, qr/^crawlward_facet_refused_total\{rule="facet-crawler-params"\} 1$/m,
	'the facet guard\'s refusal, by rule');
like($p, qr/^crawlward_facet_refused_total\{rule="facet-no-referer"\} 0$/m,
	'and the other rule at 0');

# the kept copy was last checked a month ago, after it was fetched
# (t/ranges/: 2026-11-30T00:00:00Z): the later, its fetch, counts
my $fetched = 1795996800;
my ($age) = $p =~ /^crawlward_ranges_age_seconds\{agent="Googlebot"\} (\d+)$/m;
ok(defined $age && abs($age - (time() - $fetched)) <= 60,
	'the ranges\' age: since the later of their fetch and their last check')
	or diag('age ' . ($age // 'none'));

# update-ranges finds the list unchanged: the copy's time moves, nothing is
# reloaded, and the status says so at once
my $now = time();
utime($now, $now, $kept) or die "utime $kept: $!\n";
$p = body(get('/crawlward-status?format=prometheus', ua => undef)) // '';
($age) = $p =~ /^crawlward_ranges_age_seconds\{agent="Googlebot"\} (\d+)$/m;
ok(defined $age && $age < 600, 'checked now: its age is back to seconds, without a reload')
	or diag('age ' . ($age // 'none'));

my $json = decode_json(body(get('/crawlward-status', ua => undef)) || '{}');
my ($g) = grep { $_->{agent} eq 'Googlebot' } @{ $json->{ranges} || [] };
ok($g && defined $g->{checked} && abs($g->{checked} - $now) <= 1,
	'the JSON says when it was checked') or diag(explain($g));
my ($f) = grep { $_->{rule} eq 'facet-crawler-params' } @{ $json->{facets} || [] };
is($f && $f->{refused}, 1, 'the JSON counts the facet refusal too');

if ($promtool) {
	my ($rc, $out) = run_bounded(60, $promtool, 'check', 'rules',
		"$root/contrib/prometheus/crawlward-alerts.yml");
	is($rc, 0, 'promtool check rules: the alert rules parse') or diag($out);

	# the dashboard's queries, with Grafana's variables filled in, as recording rules
	my $rules = "groups:\n  - name: dashboard\n    rules:\n";
	my $i = 0;
	for my $q (grep { $_->[0] =~ /^dashboard/ } @queries) {
		(my $e = $q->[1]) =~ s/\$__rate_interval/5m/g;
		$e =~ s/\$instance/.*/g;
		$e =~ s/'/''/g;
		$rules .= "      - record: dashboard_query_" . ++$i . "\n        expr: '$e'\n";
	}
	$t->write_file('dashboard-rules.yml', $rules);
	($rc, $out) = run_bounded(60, $promtool, 'check', 'rules', "$d/dashboard-rules.yml");
	is($rc, 0, 'promtool check rules: the dashboard\'s queries parse') or diag($out);
}

###############################################################################

# [where, PromQL] of each panel's queries
sub queries_of_dashboard {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!\n";
	my $dash = decode_json(do { local $/; <$fh> });
	my @q;
	for my $panel (@{ $dash->{panels} }) {
		for my $target (@{ $panel->{targets} || [] }) {
			push @q, ["dashboard \"$panel->{title}\" $target->{refId}",
				$target->{expr}];
		}
	}
	return @q;
}

# [where, PromQL] of each rule: `expr:` on one line, or folded (>-) over the
# lines indented below it
sub queries_of_rules {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!\n";
	my ($alert, @q, $folding, $indent) = ('');
	for my $line (<$fh>) {
		chomp $line;
		if (defined $folding) {
			if ($line =~ /^(\s+)\S/ && length($1) > $indent) {
				(my $part = $line) =~ s/^\s+//;
				$folding .= ($folding eq '' ? '' : ' ') . $part;
				next;
			}
			push @q, ["rule $alert", $folding];
			undef $folding;
		}
		$alert = $1 if $line =~ /^\s*- alert:\s*(\S+)/;
		if ($line =~ /^(\s*)expr:\s*>-\s*$/) {
			($folding, $indent) = ('', length $1);
		} elsif ($line =~ /^\s*expr:\s*(.+?)\s*$/) {
			push @q, ["rule $alert", $1];
		}
	}
	push @q, ["rule $alert", $folding] if defined $folding;
	return @q;
}

###############################################################################
