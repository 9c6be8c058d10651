package Crawlward::Sign;

# Web Bot Auth for the tests: Ed25519 keys made with openssl, their public
# half as a JWK's x, and a request's headers signed as a signer following
# the webbotauth draft writes them (RFC 9421).

use warnings;
use strict;

use Exporter qw/ import /;
use MIME::Base64 qw/ encode_base64 encode_base64url /;

our @EXPORT = qw/ new_key public_x signed_headers test_ca /;

# a new Ed25519 private key in $file (PEM)
sub new_key {
	my ($file) = @_;
	system("openssl genpkey -algorithm ed25519 -out $file 2>/dev/null") == 0
		or die "openssl genpkey failed\n";
}

# test_ca($dir, @ips): a CA of the test's own ($dir/ca.pem) and a server
# certificate it signed for localhost and the addresses @ips
# ($dir/server.pem, $dir/server.key), for key directories served over HTTPS
sub test_ca {
	my ($dir, @ips) = @_;
	my $openssl = sub {
		system("openssl $_[0] >/dev/null 2>&1") == 0 or die "openssl $_[0] failed\n";
	};
	my $ec = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';
	$openssl->("req -x509 $ec -keyout $dir/ca.key -out $dir/ca.pem -days 2 -subj '/CN=crawlward test CA'");
	$openssl->("req $ec -keyout $dir/server.key -out $dir/server.csr -subj /CN=localhost");
	open my $fh, '>', "$dir/server.ext" or die "server.ext: $!\n";
	print $fh "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost"
		. join('', map { ",IP:$_" } @ips) . "\n";
	close $fh;
	$openssl->("x509 -req -in $dir/server.csr -CA $dir/ca.pem -CAkey $dir/ca.key -CAcreateserial"
		. " -out $dir/server.pem -days 2 -extfile $dir/server.ext");
}

# the public half of the key in $file, as a JWK's x
sub public_x {
	my ($file) = @_;
	my $der = `openssl pkey -in $file -pubout -outform DER`;
	return encode_base64url(substr($der, -32));
}

# signed_headers($dir, key => FILE, keyid => ID, %o): the header lines of a
# request signed with the key in FILE; $dir holds the signature base
# while openssl signs it.
#
#   agent      the directory, default https://agent.example
#   legacy     1: Signature-Agent as the older bare string
#   covered    the covered components, default @authority and signature-agent
#   authority  the @authority signed, default localhost
#   tag        default web-bot-auth; undef: none
#   nonce      default a random one; undef: none
#   created, expires  default now and five minutes later
sub signed_headers {
	my ($dir, %o) = @_;
	my $created = $o{created} // time();
	my $expires = $o{expires} // $created + 300;
	my $agent = $o{agent} // 'https://agent.example';
	my $legacy = $o{legacy};
	my $agent_component = $legacy ? '"signature-agent"' : '"signature-agent";key="a1"';
	my @covered = @{ $o{covered} // ['"@authority"', $agent_component] };
	my $tag = exists $o{tag} ? $o{tag} : 'web-bot-auth';
	my $nonce = exists $o{nonce} ? $o{nonce} : 'n-' . int(rand(1e9));
	my $params = '(' . join(' ', @covered) . ')'
		. ";created=$created;expires=$expires;keyid=\"$o{keyid}\";alg=\"ed25519\""
		. (defined $nonce ? ";nonce=\"$nonce\"" : '')
		. (defined $tag ? ";tag=\"$tag\"" : '');
	my %value = (
		'"@authority"' => $o{authority} // 'localhost',
		'"@method"' => 'GET',
		'"signature-agent"' => "\"$agent\"",
		'"signature-agent";key="a1"' => "\"$agent\"",
	);
	my $base = join('', map { "$_: $value{$_}\n" } @covered)
		. "\"\@signature-params\": $params";
	open(my $fh, '>', "$dir/base.txt") or die "base.txt: $!\n";
	print $fh $base;
	close($fh);
	my $sig = `openssl pkeyutl -sign -inkey $o{key} -rawin -in $dir/base.txt`;
	die "openssl pkeyutl failed\n" unless length($sig) == 64;
	return (
		'Signature-Agent: ' . ($legacy ? "\"$agent\"" : "a1=\"$agent\""),
		"Signature-Input: s1=$params",
		'Signature: s1=:' . encode_base64($sig, '') . ':',
	);
}

1;
