#!/bin/sh
# greet.sh: ask for a name on stdin, greet it, then count the remaining lines.
printf 'What is your name? '
read -r name
echo "Hello, $name!"
n=$(wc -l)
echo "and $n more line(s) until stdin was closed"
