#!/bin/sh
# test.sh: run every case, print ok/FAIL per case, exit 1 if any failed.
cd "$(dirname "$0")" || exit 2
. ./calc.sh

pass=0
fail=0
check() { # name expected actual
	if [ "$2" = "$3" ]; then
		echo "ok   $1 = $3"
		pass=$((pass + 1))
	else
		echo "FAIL $1: expected $2, got $3"
		fail=$((fail + 1))
	fi
}

check "add 2 3" 5 "$(add 2 3)"
check "sub 7 4" 3 "$(sub 7 4)"
check "mul 6 7" 42 "$(mul 6 7)"
check "mul 2 2" 4 "$(mul 2 2)"
check "square 9" 81 "$(square 9)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
