#!/bin/bash
# Build sbx-worker and the driver, then run the driver (TAP on stdout).
#   tests/worker/run.sh                  plain run
#   tests/worker/run.sh --valgrind       the worker under valgrind (memcheck)
#   WORKER_WRAPPER="strace -f -o /tmp/w" tests/worker/run.sh   any other wrapper
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ ${1-} == --valgrind ]]; then
        export WORKER_WRAPPER="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
fi

make --no-print-directory -s build/bin/sbx-worker build/lib/libsbx.a
mkdir -p build/tests
# shellcheck disable=SC2046 # word splitting of pkg-config output is intended
cc -D_GNU_SOURCE -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
        -iquote common -iquote proto -Ibuild/gen \
        tests/worker/drive-worker.c build/lib/libsbx.a $(pkg-config --libs libprotobuf-c) \
        -o build/tests/drive-worker

exec build/tests/drive-worker build/bin/sbx-worker
