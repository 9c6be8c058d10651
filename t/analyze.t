#!/usr/bin/perl

# crawlward analyze on what nginx wrote: catalogue.yaml's install.access_log
# (crawlward_combined) and a plain combined log of the same requests give the
# same claims and statuses; a verified Googlebot answered 503 in maintenance
# is the policy mistake heratio.org's guide warns of (exit 6), robots.txt answered 200 throughout,
# the browser on a sort variant ignored robots.txt.

use warnings;
use strict;

use Test::More;

use JSON::PP;
use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; '
	. 'compatible; GPTBot/1.2; +https://openai.com/gptbot)';

my $t = Test::Nginx->new()->has(qw/http rewrite map limit_req limit_conn/)
	->plan(23);

my $dir = render($t, 'nginx-conf/catalogue.yaml');
my $d = $t->testdir();
my $log = access_log($t);
write_page($t);

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
        # nginx's own combined format too, as a stock site logs
        access_log $d/combined.log combined;

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

ok(defined $log && $log =~ m!/var/log/nginx/heratio_access\.log$!,
	'catalogue.yaml sets install.access_log');

# t/ranges puts Google's crawlers at 127.0.0.2
my @sent = (
	[ '/record/1', $GOOGLEBOT, '127.0.0.2' ],
	[ '/robots.txt', $GOOGLEBOT, '127.0.0.2' ],
	[ '/sitemap.xml', $GOOGLEBOT, '127.0.0.2' ],
	[ '/record/1', $GOOGLEBOT, '127.0.0.3' ],		# spoofed: 444
	[ '/record/2', $GPTBOT, '127.0.0.1' ],			# ai-training: 444
	[ '/glam/browse?sort=title', BROWSER, '127.0.0.1' ],	# robots.txt disallows sort=
	[ '/api/v1/records', 'python-requests/2.31', '127.0.0.1' ],	# a machine door
);
for my $r (@sent) {
	get($r->[0], ua => $r->[1], from => $r->[2]);
}

# maintenance: a verified Googlebot gets 503 (heratio.org's guide: a policy
# mistake if it lasts), robots.txt keeps answering 200
my $flag = flag_file($t);
open(my $fh, '>', $flag) or die "can't create $flag: $!";
close $fh;
is(status(get('/record/3', ua => $GOOGLEBOT, from => '127.0.0.2')), 503,
	'maintenance: 503 for a page');
is(status(get('/robots.txt', ua => $GOOGLEBOT, from => '127.0.0.2')), 200,
	'maintenance: robots.txt answers 200');
unlink $flag;

my $n = @sent + 2;
ok(wait_file_lines($log, $n) && wait_file_lines("$d/combined.log", $n),
	"nginx wrote $n lines to both logs");

my ($status, $out) = analyze($log);
is($status >> 8, 6, 'the search-crawler check fails the run: exit 6');
my $r = eval { decode_json($out) } || {};

is($r->{formats}{crawlward_combined}, $n, 'every line in crawlward_combined');
is_deeply($r->{unparseable}, [], 'no unparseable line');

my ($g) = grep { $_->{agent} eq 'Googlebot' } @{ $r->{agents} || [] };
is($g->{verified}, 5, 'Googlebot: 5 verified requests');
is($g->{spoofed}, 1, 'Googlebot: 1 spoofed request');
is_deeply($g->{statuses}, { 200 => 4, 444 => 1, 503 => 1 },
	'Googlebot: the statuses nginx answered');
is($g->{robots_fetches}, 2, 'Googlebot read robots.txt twice');

my ($gpt) = grep { $_->{agent} eq 'GPTBot' } @{ $r->{agents} || [] };
is_deeply($gpt->{statuses}, { 444 => 1 }, 'GPTBot: 444');

my $check = $r->{checks} || {};
is($check->{verified_search_refused}[0]{agent}, 'Googlebot',
	'the check names Googlebot');
is_deeply([ $check->{verified_search_refused}[0]{statuses},
		$check->{verified_search_refused}[0]{by} ],
	[ { 503 => 1 }, { maintenance => 1 } ],
	'and the 503 it got, from the maintenance switch');
is($check->{robots_requests}, 2, 'robots.txt was asked for twice');
is_deeply($check->{robots_not_ok}, {}, 'and answered 200 each time');

my ($people) = grep { $_->{name} eq '(no agent)' }
	@{ $r->{robots_ignored}{by_agent} || [] };
is($people->{disallowed}, 1, 'the browser on ?sort= ignored robots.txt');

my ($vg) = grep { $_->{name} eq 'verified:Googlebot' }
	@{ $r->{classifier}{clients} || [] };
ok($vg && grep({ $_ eq 'robots.txt' } @{ $vg->{honoured} }),
	'the verified crawler is one client, and honours robots.txt');

# the text report says so in words
($status, $out) = analyze($log, '--format', 'text');
like($out, qr/^search-crawler check: POLICY MISTAKES\n  verified Googlebot got 503:1, from maintenance 1 \(first at \Q$log\E:8\)/m,
	'text: the mistake, who answered it, where it is in the log');

# the combined log of the same requests, verified by the published ranges
# (the snapshot's in t/ranges) rather than by the log's verdict
($status, $out) = analyze("$d/combined.log");
is($status >> 8, 6, 'combined: exit 6 too');
my $c = eval { decode_json($out) } || {};
is($c->{formats}{combined}, $n, 'combined: every line in combined');
my ($cg) = grep { $_->{agent} eq 'Googlebot' } @{ $c->{agents} || [] };
is_deeply([ $cg->{verified}, $cg->{spoofed} ], [ 5, 1 ],
	'combined: the same verified and spoofed claims, from the ranges');
is_deeply($cg->{statuses}, $g->{statuses}, 'combined: the same statuses');

###############################################################################

sub analyze {
	my ($file, @args) = @_;
	@args = ('--format', 'json') unless @args;
	return run_bounded(60, crawlward_bin(), 'analyze',
		repo_root() . '/nginx-conf/catalogue.yaml', $file,
		'--ranges-dir', repo_root() . '/t/ranges', @args);
}
