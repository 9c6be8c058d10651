#!/usr/bin/perl

# ngx_http_crawlward_module: names a client or a login chose, as the status
# endpoint, Prometheus and the access log show them. Every account stays
# one account to the reader: a name outside printable ASCII is shown as the
# access log writes it (\xHH), a long name's hashed form and a name that
# spells it are two accounts (the status says which is hashed, the log
# writes the spelled name's `~` as %7E), and an account named `-` is not
# the log's empty value. An unknown bot's product token with `"` and `\`
# in it is one Prometheus label, not two merged into `_`.

use warnings;
use strict;

use Test::More;

use MIME::Base64 qw/ encode_base64 /;
use Digest::SHA qw/ sha256_hex /;

use Test::Nginx qw/ port /;
use Crawlward::Test;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http realip map limit_req auth_basic/)
	->plan(16);

my $dir = render($t, 't/policies/quota.yaml');
my $d = $t->testdir();
write_page($t);

my $LONG = 'a' x 50;
# the zone keeps a name longer than 46 bytes as its first 29, `~` and 16
# hex digits of its SHA-256
my $HASHED = ('a' x 29) . '~' . substr(sha256_hex($LONG), 0, 16);
my %users = (dash => '-', tilde => 't~ilde', long => $LONG,
	spelled => $HASHED, accented => "caf\xc3\xa9");
$t->write_file('htpasswd', join '', map { "$_:{PLAIN}pw\n" } values %users);

$t->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    include $dir/crawlward-http.conf;

    crawlward_budget_zone zone=names:1m;

    log_format fields '\$request_uri \$crawlward_log_fields';

    server {
        listen       127.0.0.1:%%PORT_8080%%;
        server_name  localhost;

        include $dir/crawlward-server.conf;
        access_log $d/fields.log fields;

        location /members/ {
            auth_basic "members";
            auth_basic_user_file $d/htpasswd;
            crawlward_quota zone=crawlward_quota account=\$remote_user default=standard;
            root $d/www;
            try_files /page.html =404;
        }

        location /crawl/ {
            crawlward_budget zone=names agent=1r/m,1r/m;
            root $d/www;
            try_files /page.html =404;
        }
    }
}

EOF

$t->run();

###############################################################################

my $BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

sub member {
	my ($name, $n) = @_;
	my $auth = 'Authorization: Basic ' . encode_base64("$name:pw", '');
	return join ' ', map { status(get("/members/$_", ua => $BROWSER,
		xff => '192.0.2.1', headers => [ $auth ])) // 'none' } 1 .. $n;
}

# each account its own count, so that the status lists them in a known order
is(member($users{long}, 5), '200 200 200 200 200', 'the long name: 5 requests');
is(member($users{spelled}, 4), '200 200 200 200', 'the name that spells its hashed form: 4 requests, a quota of its own');
is(member($users{accented}, 3) . ' ' . member($users{tilde}, 2) . ' ' . member($users{dash}, 1),
	'200 200 200 200 200 200', 'café, t~ilde and -: their requests');

my $st = module_status('/crawlward-status');
my ($q) = @{ $st->{quotas} || [] };
is_deeply([ map { "$_->{account}:" . ($_->{hashed} ? 'hashed' : 'name') . ":$_->{last_hour}" } @{ $q->{top_accounts} || [] } ],
	[ "$HASHED:hashed:5", "$HASHED:name:4", 'caf\xC3\xA9:name:3', 't~ilde:name:2', '-:name:1' ],
	'status: five accounts, the hashed form marked, café as the log writes it');

my $prom = get('/crawlward-status?format=prometheus', ua => undef);
like($prom, qr/^crawlward_quota_account_requests_last_hour\{zone="crawlward_quota",account="caf\\\\xC3\\\\xA9",source="variable"\} 3$/m,
	'prometheus: café\'s label, its backslashes escaped');

like($prom, qr/^crawlward_quota_account_requests_last_hour\{zone="crawlward_quota",account="\Q$HASHED\E",source="variable",hashed="true"\} 5$/m,
	'prometheus: the hashed form, labelled so');
like($prom, qr/^crawlward_quota_account_requests_last_hour\{zone="crawlward_quota",account="\Q$HASHED\E",source="variable"\} 4$/m,
	'prometheus: the name that spells it, its own series');

# an unknown bot's token with `"` and `\` in it: one label of its own
my $QUILL = 'Qu\\ill"Bot/1.0 (+https://example.com/bot)';
my $UNDERSCORE = 'Qu_ill_Bot/1.0 (+https://example.com/bot)';
is(join(' ', map { status(get('/crawl/x', ua => $QUILL, xff => "198.51.100.$_")) // 'none' } 1 .. 3),
	'200 429 429', 'the bot with a quote in its token: its agent budget refuses');
is(join(' ', map { status(get('/crawl/x', ua => $UNDERSCORE, xff => "198.51.100.1$_")) // 'none' } 1 .. 2),
	'200 429', 'the bot whose token has `_` where the other has `\\` and `"`: a budget of its own');
$prom = get('/crawlward-status?format=prometheus', ua => undef);
like($prom, qr/^crawlward_budget_agent_refused_total\{zone="names",agent="Qu\\\\x5Cill\\\\x22Bot"\} 2$/m,
	'prometheus: the token as the log writes it, as a label');
like($prom, qr/^crawlward_budget_agent_refused_total\{zone="names",agent="Qu_ill_Bot"\} 1$/m,
	'prometheus: the other token, its own series');
$st = module_status('/crawlward-status');
my ($names) = grep { $_->{zone}{name} eq 'names' } @{ $st->{budgets} || [] };
is(join(' ', map { "$_->{agent}:$_->{refused}" } @{ $names->{top_refused} || [] }),
	'Qu\x5Cill\x22Bot:2 Qu_ill_Bot:1', 'status: both tokens, apart');

# the access log: each account one word, read back as one account
$t->stop();
my @fields = file_lines("$d/fields.log");
my $word = sub { my ($re) = @_; scalar grep { m!^/members/\d+ .* account=$re tier=standard source=variable$! } @fields };
is($word->(quotemeta($HASHED)), 5, 'access log: the hashed form keeps its ~');
is($word->(quotemeta(('a' x 29) . '%7E' . substr(sha256_hex($LONG), 0, 16))), 4,
	'access log: the name that spells it, its ~ encoded');
is($word->(quotemeta('caf\xC3\xA9')) . ' ' . $word->('t%7Eilde'), '3 2', 'access log: café as nginx escapes it, t~ilde encoded');
is($word->('%2D'), 1, 'access log: the account named - is %2D, not the empty value');

###############################################################################
