# robots.source: app: robots.txt comes from the application through nginx, the last good answer is kept on disk, and whenever the application cannot answer (maintenance, 429, 500, 503, down, hanging past robots.app_timeout) nginx answers 200 from the kept copy, or from the rendered file before any copy was kept; only a complete plain-text 200 replaces the kept copy.

use warnings;
use strict;

use Test::More;

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw/ time sleep /;

use Test::Nginx;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; '
	. '+http://www.google.com/bot.html)';

my $APP_TIMEOUT = 1;	# robots.app_timeout in the policy below

# what the application answers for robots.txt, by mode
my %APP = (
	v1 => [200, 'text/plain', "User-agent: *\nDisallow: /app-one\n"],
	v2 => [200, 'text/plain; charset=utf-8',
		"User-agent: *\nDisallow: /app-two\n"],
	html => [200, 'text/html', "<html><body>down for maintenance</body></html>\n"],
	gzip => [200, 'text/plain', "\x1f\x8b\x08\x00compressed", 'Content-Encoding: gzip'],
	unbuffered => [200, 'text/plain', "User-agent: *\nDisallow: /app-unbuffered\n",
		'X-Accel-Buffering: no'],
	e429 => [429, 'text/html', "<html>slow down</html>\n"],
	e500 => [500, 'text/html', "<html>internal error</html>\n"],
	e503 => [503, 'text/html', "<html>unavailable</html>\n"],
	e404 => [404, 'text/html', "<html>no such page</html>\n"],
	plain200 => [200, 'text/plain', "Service temporarily unavailable\n"],
);

my $t = Test::Nginx->new()
	->has(qw/http proxy rewrite map limit_req limit_conn/)->plan(65);

my $d = $t->testdir();

# the shipped catalogue policy, its robots.txt asked of the application
my $policy = slurp(repo_root() . '/nginx-conf/catalogue.yaml');
my $app = 'http://127.0.0.1:' . port(8081) . '/robots.txt';
$policy =~ s/^robots:\n/robots:\n  source: app\n  app_url: $app\n  app_timeout: $APP_TIMEOUT\n/m
	or die "no robots section in catalogue.yaml\n";
$t->write_file('policy.yaml', $policy);

my $dir = render($t, "$d/policy.yaml");
my $flag = flag_file($t);
my $refused = "$dir/app-robots/refused.txt";

# with the module, the application's newest answer waits in robots.txt.new
# until the module reads it (when the application next fails); without it,
# the answer is the kept copy at once
my $module = rendered_file($t, 'crawlward-server.conf') =~ /^\s*crawlward_robots_kept /m;
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

        location / {
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

app_mode('e500');
$t->run_daemon(\&app, port(8081), $d);
$t->run();
$t->waitforsocket('127.0.0.1:' . port(8081))
	or die "Can't start the application on port " . port(8081) . "\n";

###############################################################################

my $rendered = rendered_file($t, 'robots.txt');
like($rendered, qr/^Disallow: \/admin$/m, 'the rendered robots.txt');

# no copy kept yet: the rendered file

my $r = robots();
is(status($r), 200, 'no copy, app 500: 200');
is(body($r), $rendered, 'no copy, app 500: the rendered robots.txt');
like(header($r, 'Content-Type'), qr!^text/plain!, 'no copy: text/plain');

app_mode('down');
$r = robots();
is(status($r), 200, 'no copy, app down: 200');
is(body($r), $rendered, 'no copy, app down: the rendered robots.txt');
is(kept(), undef, 'no copy, app down: nothing kept');

# the application answers: its file, kept

app_mode('v1');
$r = robots();
is(status($r), 200, 'app up: 200');
is(body($r), $APP{v1}[2], "app up: the application's robots.txt");
is(wait_kept($APP{v1}[2]), $APP{v1}[2], 'app up: the answer is kept');

my $asked = app_requests();
my $last;
like($asked->[-1], qr!^GET /robots\.txt HTTP/1\.[01]\n!, 'the application is asked GET /robots.txt');
like($asked->[-1], qr!^Host: heratio\.org$!mi, 'with the canonical host');

# nothing a client writes reaches the application: not the query, the host,
# a cookie, credentials, a body, nor the X-Accel headers' effect

$r = get('/robots.txt?page=2', ua => BROWSER, host => 'other.example',
	headers => ['Cookie: session=abc', 'Authorization: Basic eDp5']);
is(status($r), 200, 'a client with a query, a host, a cookie: 200');
$last = app_requests()->[-1];
like($last, qr!^GET /robots\.txt HTTP/1\.[01]\n!, 'the application is asked without the query');
like($last, qr!^Host: heratio\.org$!mi, 'nor the host');
unlike($last, qr/^(Cookie|Authorization):/mi, 'nor the cookie and credentials');

app_mode('unbuffered');
$r = robots();
is(body($r), $APP{unbuffered}[2], 'app with X-Accel-Buffering: no: its answer');
is(wait_kept($APP{unbuffered}[2]), $APP{unbuffered}[2],
	'app with X-Accel-Buffering: no: kept all the same');
app_mode('v1');
robots();
is(wait_kept($APP{v1}[2]), $APP{v1}[2], 'app back to its file: kept');

# HEAD is asked of the application as GET, so the kept copy is whole

$r = http("HEAD /robots.txt HTTP/1.0\x0d\x0aHost: localhost\x0d\x0a"
	. "User-Agent: $GOOGLEBOT\x0d\x0a\x0d\x0a");
is(status($r), 200, 'HEAD: 200');
is(body($r), '', 'HEAD: no body');
like(app_requests()->[-1], qr!^GET /robots\.txt!, 'HEAD: the application is asked GET');
is(kept(), $APP{v1}[2], 'HEAD: the kept copy is whole');

# a client's compression, range and conditions never reach the application

$r = robots(headers => ['Accept-Encoding: gzip', 'Range: bytes=0-3',
	'If-Modified-Since: Mon, 01 Jan 2035 00:00:00 GMT',
	'If-None-Match: "x"']);
is(status($r), 200, 'a client asking gzip, a range and a condition: 200');
$last = app_requests()->[-1];
unlike($last, qr/^(Accept-Encoding|Range|If-Modified-Since|If-None-Match):/mi,
	'the application is asked for the whole, plain file');

# each way the application fails: the kept copy, 200

for my $mode (qw/ e500 e503 e429 down /) {
	app_mode($mode);
	$r = robots();
	is(status($r), 200, "app $mode: 200");
	is(body($r), $APP{v1}[2], "app $mode: the kept copy");
}

app_mode('hang');
my $start = time();
$r = robots();
my $took = time() - $start;
is(status($r), 200, 'app hanging: 200');
is(body($r), $APP{v1}[2], 'app hanging: the kept copy');
ok($took >= $APP_TIMEOUT - 0.2 && $took < $APP_TIMEOUT + 4,
	"app hanging: answered after robots.app_timeout (${took}s)");

is(kept(), $APP{v1}[2], 'after every failure: the kept copy is the good answer');

# a 200 that is not plain text, or is compressed: passed on, never kept

app_mode('html');
$r = robots();
is(status($r), 200, 'app html 200: passed on');
is(body($r), $APP{html}[2], "app html 200: the application's answer");
is(wait_content($refused, $APP{html}[2]), $APP{html}[2],
	'app html 200: written to refused.txt');
is(kept(), $APP{v1}[2], 'app html 200: the kept copy stays');

app_mode('gzip');
$r = robots();
is(status($r), 200, 'app gzip 200: passed on');
is(wait_content($refused, $APP{gzip}[2]), $APP{gzip}[2],
	'app gzip 200: written to refused.txt');
is(kept(), $APP{v1}[2], 'app gzip 200: the kept copy stays');

# a plain-text 200 that is not robots.txt (an error page): passed on; the
# module keeps the last good copy, stock nginx cannot read the body

app_mode('plain200');
$r = robots();
is(status($r), 200, 'app plain-text error 200: passed on');
is(body($r), $APP{plain200}[2], "app plain-text error 200: the application's answer");
app_mode('down');
$r = robots();
is(status($r), 200, 'then app down: 200');
if ($module) {
	is(body($r), $APP{v1}[2], 'then app down: the last good copy (the module read the error page)');
	is(slurp($refused), $APP{plain200}[2], 'the error page is put aside as refused.txt');
	is(slurp("$dir/app-robots/robots.txt"), $APP{v1}[2], 'the kept copy is the last good one');
} else {
	is(body($r), $APP{plain200}[2], 'then app down: stock nginx kept the error page (documented)');
	is(slurp($refused), $APP{gzip}[2], 'stock nginx: nothing new put aside (the gzip answer is still there)');
	is(slurp("$dir/app-robots/robots.txt"), $APP{plain200}[2], 'stock nginx: the kept copy is the plain-text answer');
	# the good copy back, for what follows
	app_mode('v1');
	robots();
	wait_kept($APP{v1}[2]);
}

# a 404 is the application's word that there is no robots.txt: passed on

app_mode('e404');
$r = robots();
is(status($r), 404, 'app 404: passed on');
is(kept(), $APP{v1}[2], 'app 404: the kept copy stays');

# maintenance: the kept copy, without asking the application

app_mode('v2');
open(my $fh, '>', $flag) or die "Can't create $flag: $!\n";
close $fh;

my $before = scalar @{app_requests()};
$r = robots();
is(status($r), 200, 'maintenance: robots.txt 200');
is(body($r), $APP{v1}[2], 'maintenance: the kept copy');
is(scalar @{app_requests()}, $before, 'maintenance: the application is not asked');
$r = get('/record/1', ua => BROWSER);
is(status($r), 503, 'maintenance: a page 503');

unlink $flag or die "Can't remove $flag: $!\n";

# maintenance over: the application's new file, kept

$r = robots();
is(status($r), 200, 'maintenance over: 200');
is(body($r), $APP{v2}[2], "maintenance over: the application's new file");
is(wait_kept($APP{v2}[2]), $APP{v2}[2], 'maintenance over: the new file is kept');

app_mode('e503');
$r = robots(ua => $GOOGLEBOT, from => '127.0.0.2');
is(status($r), 200, 'Googlebot, app 503: 200');
is(body($r), $APP{v2}[2], 'Googlebot, app 503: the newest kept copy');

# a flood of robots.txt requests from many addresses: every one answered
# 200 with the file, and at most 5 a second (burst 10) reach the application

app_mode('v2');
$before = scalar @{app_requests()};
my ($flood, $ok) = (60, 0);
$start = time();
for my $i (1 .. $flood) {
	$r = robots(from => '127.0.0.' . (10 + $i % 50));
	$ok++ if status($r) eq '200' && body($r) eq $APP{v2}[2];
}
$took = time() - $start;
is($ok, $flood, "a flood of $flood: every one 200 with the file");
my $reached = scalar @{app_requests()} - $before;
ok($reached <= 10 + 5 * $took + 2,
	"a flood of $flood in ${took}s: $reached reached the application");

# the kept copy outlives nginx: stopped and started again, app down

$t->stop();
app_mode('down');
$t->run();

$r = robots();
is(status($r), 200, 'after a restart, app down: 200');
is(body($r), $APP{v2}[2], 'after a restart, app down: the kept copy');

###############################################################################

sub robots {
	my (%o) = @_;
	return get('/robots.txt', ua => $o{ua} // BROWSER, %o);
}

sub app_mode {
	my ($mode) = @_;
	open(my $fh, '>', "$d/app-mode.new") or die "Can't write app mode: $!\n";
	print $fh $mode;
	close $fh;
	rename("$d/app-mode.new", "$d/app-mode") or die "Can't set app mode: $!\n";
	# the application notices a change of listening within its poll
	sleep(0.3);
}

# what nginx keeps now: the newest answer, else the kept copy
sub kept {
	return slurp("$dir/app-robots/robots.txt.new")
		// slurp("$dir/app-robots/robots.txt");
}

sub wait_kept {
	my ($want) = @_;
	my $deadline = time() + 5;
	my $c = kept();
	while ((!defined $c || $c ne $want) && time() < $deadline) {
		sleep(0.05);
		$c = kept();
	}
	return $c;
}

sub slurp {
	my ($file) = @_;
	open(my $fh, '<', $file) or return undef;
	local $/;
	return scalar <$fh>;
}

# the file's content once it is $want, or what it is after 5 s
sub wait_content {
	my ($file, $want) = @_;
	my $deadline = time() + 5;
	my $c = slurp($file);
	while ((!defined $c || $c ne $want) && time() < $deadline) {
		sleep(0.05);
		$c = slurp($file);
	}
	return $c;
}

# the requests the application received, each as "line\nheaders"
sub app_requests {
	my $log = slurp("$d/app.log") // '';
	return [ grep { length } split /\n\n/, $log ];
}

###############################################################################

# The application: an HTTP/1.0 server in one process. Each request is
# answered as $d/app-mode says: a %APP entry, "hang" (read, never answer) or
# "down" (nothing listens: connections are refused). Every request's line
# and headers are appended to $d/app.log.

sub app {
	my ($port, $dir) = @_;

	my $parent = getppid();
	my ($server, %c);
	my $sel = IO::Select->new();

	while (getppid() == $parent) {
		my $mode = slurp("$dir/app-mode") // 'down';

		if ($mode eq 'down' && $server) {
			$sel->remove($server);
			close $server;
			undef $server;
		} elsif ($mode ne 'down' && !$server) {
			$server = IO::Socket::INET->new(
				Proto => 'tcp',
				LocalAddr => "127.0.0.1:$port",
				Listen => 16,
				ReuseAddr => 1,
			) or die "Can't listen on 127.0.0.1:$port: $@\n";
			$server->blocking(0);
			$sel->add($server);
		}

		for my $s ($sel->can_read(0.05)) {
			if ($server && $s == $server) {
				while (my $n = $server->accept()) {
					$n->blocking(0);
					$sel->add($n);
					$c{fileno $n} = { s => $n, buf => '' };
				}
				next;
			}

			my $st = $c{fileno $s};
			my $got = sysread($s, $st->{buf}, 4096, length $st->{buf});

			if (!$got) {
				next if !defined $got && $!{EAGAIN};
				$sel->remove($s);
				delete $c{fileno $s};
				close $s;
				next;
			}

			next if $st->{answered} || $st->{buf} !~ /\x0d?\x0a\x0d?\x0a/;

			(my $head = $st->{buf}) =~ s/\x0d?\x0a\x0d?\x0a.*//s;
			$head =~ s/\x0d//g;
			if (open(my $log, '>>', "$dir/app.log")) {
				print $log "$head\n\n";
				close $log;
			}

			$st->{answered} = 1;
			next if $mode eq 'hang';

			my ($code, $type, $body, $extra)
				= @{ $APP{$mode} || $APP{e500} };
			my $reply = "HTTP/1.0 $code X\x0d\x0a"
				. "Content-Type: $type\x0d\x0a"
				. "Content-Length: " . length($body) . "\x0d\x0a"
				. (defined $extra ? "$extra\x0d\x0a" : '')
				. "Connection: close\x0d\x0a\x0d\x0a" . $body;
			$s->blocking(1);
			print $s $reply;
			$sel->remove($s);
			delete $c{fileno $s};
			close $s;
		}
	}
}

###############################################################################
