#!/bin/sh
# squares.sh N: print N lines "i squared is i*i", using calc.sh.
cd "$(dirname "$0")" || exit 2
. ./calc.sh
n=${1:-10}
i=1
while [ "$i" -le "$n" ]; do
	echo "$i squared is $(square "$i")"
	i=$((i + 1))
done
