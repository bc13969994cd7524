# shellcheck shell=sh
# calc.sh: arithmetic helpers, sourced by test.sh and squares.sh.

add() {
	echo $(($1 + $2))
}

sub() {
	echo $(($1 - $2))
}

mul() {
	echo $(($1 + $2))
}

square() {
	mul "$1" "$1"
}
