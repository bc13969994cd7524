# lines.pl BYTES: writes BYTES bytes of 100-byte lines to stdout in 1 MiB
# writes. The transcript row's producer: one process and one copy into the
# pipe, so the two cores go to what is measured (yes | head costs half of them).
use strict;
use warnings;

my $left = shift // die "usage: lines.pl BYTES\n";
my $block = "the quick brown fox jumps over the lazy dog, a benchmark line of about one hundred bytes.....\n" x 10486;
while ($left > 0) {
    my $n = syswrite(STDOUT, $block, $left < length($block) ? $left : length($block));
    die "lines.pl: write: $!\n" unless defined $n;
    $left -= $n;
}
