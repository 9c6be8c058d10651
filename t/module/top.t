#!/usr/bin/perl

# `crawlward top` in a terminal: run in tmux (80x24) against a running nginx
# with known traffic and a second node that does not answer; the screen's
# text is captured after each key. Sort, filter, pause, help and quit; a
# verified search crawler refused with 429 comes first, marked.

use warnings;
use strict;

use Test::More;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';
my $GPTBOT = 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; '
	. 'GPTBot/1.2; +https://openai.com/gptbot)';

my $t = Test::Nginx->new()->has(qw/http/);
plan(skip_all => 'no tmux') unless `tmux -V 2>/dev/null` =~ /^tmux \d/;
$t->plan(12);

my $d = $t->testdir();
write_page($t);
$t->write_file('policy.yaml', <<'EOF');
site:
  canonical_url: https://example.org
  upstream_workers: 8
install:
  dir: /etc/nginx/crawlward-top
  throttle_log: /var/log/nginx/top-throttled.log
catalogue:
  agents:
    - name: Googlebot
      ranges: [127.0.0.2/32]
robots: {}
module:
  status: /crawlward-status
EOF
my $dir = render($t, "$d/policy.yaml");

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

        # a limit written for Googlebot, to see it on the screen
        location /slow/ {
            return 429;
        }

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

get("/page$_", ua => BROWSER) for 1 .. 6;
get("/record$_", ua => $GOOGLEBOT, from => '127.0.0.2') for 1 .. 3;
get('/slow/x', ua => $GOOGLEBOT, from => '127.0.0.2');
get("/x$_", ua => $GPTBOT) for 1 .. 2;

my $session = "crawlward-top-$$";
my $status = 'http://127.0.0.1:' . port(8080) . '/crawlward-status';
# a second node: a port nothing listens on
my $down = 'http://127.0.0.1:' . port(8081) . '/crawlward-status';
my $bin = crawlward_bin();

system('tmux', 'new-session', '-d', '-s', $session, '-x', 80, '-y', 24,
	"$bin top --interval 0.5 $status $down") == 0
	or die "tmux new-session failed\n";

# the pane's text, once it shows $re (up to 10 s)
sub screen {
	my ($re) = @_;
	my $text = '';
	for (1 .. 100) {
		$text = `tmux capture-pane -p -t $session 2>/dev/null`;
		return $text if $text =~ $re;
		select(undef, undef, undef, 0.1);
	}
	return $text;
}

sub press {
	system('tmux', 'send-keys', '-t', $session, @_) == 0 or die "tmux send-keys failed\n";
}

my $s = screen(qr/Googlebot/);
like($s, qr/^1 of 2 nodes answering; \Q$down\E: /m, 'the node that does not answer is named');
like($s, qr/^VERIFIED SEARCH CRAWLERS GOT 1 429\/5xx/m, 'a verified search crawler given 429 is said first');
like($s, qr/^! Googlebot\s+search\s+verified\s+\S+\s+3\s+3\s+1\s+0\s+0$/m,
	'and its row is marked: 3 requests decided (a `return` skips the module), 3 answered, one 429');
like($s, qr/^  GPTBot\s+ai-training\s+spoofed\s+\S+\s+2\s+0\s+0\s+2\s+0$/m, 'GPTBot: two 444');
like($s, qr/^refused by layer: bot-blocker 2, site 1$/m, "refusals by layer: the bot-blocker's, and the location's own 429 as the site's");
like($s, qr/^q quit  s sort  \/ filter  p pause  \? help/m, 'the keys, on the last line');
my @lines = split /\n/, $s;
ok(!grep({ length($_) > 80 } @lines), 'nothing wider than 80 columns');

press('s');
like(screen(qr/sort requests/), qr/^crawlward top: sort requests/m, 's: sort by requests');

press('/', 'GPT', 'Enter');
$s = screen(qr/filter "GPT"/);
ok($s =~ /^  GPTBot/m && $s !~ /^  -\s+none/m, '/: only the rows that match');

press('p');
like(screen(qr/PAUSED/), qr/, PAUSED$/m, 'p: paused');

press('?');
like(screen(qr/this help/), qr/^\?      this help$/m, '?: help');

press('q');
my $gone = 0;
for (1 .. 50) {
	if (system("tmux has-session -t $session 2>/dev/null") != 0) {
		$gone = 1;
		last;
	}
	select(undef, undef, undef, 0.1);
}
ok($gone, 'q: quits');
system("tmux kill-session -t $session 2>/dev/null");

###############################################################################
