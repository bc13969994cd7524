/* What the command lines of sandbox-mcp and sbx-gateway share: the usage
 * error, and the getopt cases every one of them has. These print and exit
 * (the one place outside main that does: a usage error ends a program). */
#pragma once

#include <stdarg.h>

#include "macro.h"

/* "PROGRAM: <message>\nTry 'PROGRAM --help'." on stderr, exit status 2. */
_noreturn_ void cli_usage_errorv(const char *program, const char *fmt, va_list ap);
_printf_(2, 3) _noreturn_ void cli_usage_error(const char *program, const char *fmt, ...);

/* The getopt_long result c that the program's own cases did not take:
 * log_level_opt (--log-level LEVEL: sets it and returns), 'h' (help(),
 * exit 0), 'V' (the version, exit 0), ':' and anything else (a usage error). */
void cli_common_option(const char *program, int c, int log_level_opt, void (*help)(void), char **argv);
/* After the loop: no positional argument is taken. */
void cli_no_arguments(const char *program, int argc, char **argv);
