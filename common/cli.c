#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "log.h"

void cli_usage_errorv(const char *program, const char *fmt, va_list ap) {
        fprintf(stderr, "%s: ", program);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nTry '%s --help'.\n", program);
        exit(2);
}

void cli_usage_error(const char *program, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        cli_usage_errorv(program, fmt, ap);
}

void cli_common_option(const char *program, int c, int log_level_opt, void (*help)(void), char **argv) {
        int level;

        if (c == log_level_opt) {
                level = log_level_from_string(optarg);
                if (level < 0)
                        cli_usage_error(program, "unknown log level '%s'", optarg);
                log_set_level(level);
                return;
        }
        switch (c) {
        case 'h':
                help();
                exit(0);
        case 'V':
                printf("%s %s\n", program, SBX_VERSION);
                exit(0);
        case ':':
                cli_usage_error(program, "option '%s' needs an argument", argv[optind - 1]);
        default:
                cli_usage_error(program, "unknown option '%s'", argv[optind - 1]);
        }
}

void cli_no_arguments(const char *program, int argc, char **argv) {
        if (optind < argc)
                cli_usage_error(program, "unexpected argument '%s'", argv[optind]);
}
