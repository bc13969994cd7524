/* sbxctl-completion: writes sbxctl's bash completion on stdout, from the
 * command and option tables themselves (sbxctl-verbs.c), so that a new row
 * is completed without editing a script. A build tool: the build runs it
 * into build/gen/sbxctl.bash-completion, which make install installs.
 * With --list it prints the commands' words and the options instead, one a
 * line, for tests/check-ops.sh to find each in sbxctl(8) and --help. */
#include <stdio.h>
#include <string.h>

#include "sbxctl.h"

/* The length of the first word of words, for "%.*s". */
static int noun_len(const char *words) {
        return (int) ctl_noun_len(words);
}

/* Whether an earlier row has the same first word as ctl_verbs[i]. */
static bool noun_seen(size_t i) {
        for (size_t k = 0; k < i; k++)
                if (noun_len(ctl_verbs[k].words) == noun_len(ctl_verbs[i].words) &&
                    strncmp(ctl_verbs[k].words, ctl_verbs[i].words, (size_t) noun_len(ctl_verbs[i].words)) == 0)
                        return true;
        return false;
}

/* "a | b | c" of the options taking an argument whose completion is (or,
 * with any_complete, is not) complete; socket_too includes --socket. */
static void put_options_with_arg(bool socket_too, bool any_complete) {
        bool first = true;

        for (size_t i = 0; i < ctl_n_options; i++) {
                const CtlOption *o = &ctl_options[i];

                if (!o->has_arg || (!socket_too && strcmp(o->name, "--socket") == 0) ||
                    (!any_complete && o->complete))
                        continue;
                printf("%s%s", first ? "" : " | ", o->name);
                first = false;
        }
}

/* The words before the one being completed: the noun, the verb, how many
 * arguments follow them, and the --socket to ask for sandbox names. */
static void put_scan(void) {
        printf("    local i noun=\"\" verb=\"\" nargs=0 _sbxctl_socket=\"\"\n"
               "    for ((i = 1; i < cword; i++)); do\n"
               "        case ${words[i]} in\n"
               "            --socket) _sbxctl_socket=${words[i + 1]-}; ((i++)) ;;\n"
               "            ");
        put_options_with_arg(false, true);
        printf(") ((i++)) ;;\n"
               "            -*) ;;\n"
               "            *)\n"
               "                if [[ -z $noun ]]; then noun=${words[i]}\n"
               "                elif [[ -z $verb");
        for (size_t i = 0; i < ctl_n_verbs; i++)
                if (!ctl_second_word(ctl_verbs[i].words))
                        printf(" && $noun != %s", ctl_verbs[i].words);
        printf(" ]]; then verb=${words[i]}\n"
               "                else ((nargs++)); fi\n"
               "                ;;\n"
               "        esac\n"
               "    done\n\n");
}

/* The value of an option after it. */
static void put_values(void) {
        printf("    case $prev in\n");
        for (size_t i = 0; i < ctl_n_options; i++) {
                const CtlOption *o = &ctl_options[i];

                if (!o->has_arg || !o->complete)
                        continue;
                printf("        %s) ", o->name);
                if (strcmp(o->complete, "@file") == 0)
                        printf("_filedir; return ;;\n");
                else if (strcmp(o->complete, "@dir") == 0)
                        printf("_filedir -d; return ;;\n");
                else if (strcmp(o->complete, "@user") == 0)
                        printf("COMPREPLY=($(compgen -u -- \"$cur\")); return ;;\n");
                else
                        printf("COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", o->complete);
        }
        printf("        ");
        put_options_with_arg(false, false);
        printf(") return ;;\n"
               "    esac\n\n");
}

/* The options: the global ones, and those of the command's groups. */
static void put_options(void) {
        printf("    local opts=\"");
        for (size_t i = 0, n = 0; i < ctl_n_options; i++)
                if (ctl_options[i].group == CTL_GROUP_GLOBAL)
                        printf("%s%s", n++ ? " " : "", ctl_options[i].name);
        printf("\"\n"
               "    case $noun/$verb in\n");
        for (size_t i = 0; i < ctl_n_verbs; i++) {
                const CtlVerb *v = &ctl_verbs[i];

                if (!v->groups)
                        continue;
                printf("        %.*s/%s) opts+=\"", noun_len(v->words), v->words, ctl_second_word(v->words) ?: "");
                for (size_t k = 0; k < ctl_n_options; k++)
                        if (v->groups & CTL_GROUP(ctl_options[k].group))
                                printf(" %s", ctl_options[k].name);
                printf("\" ;;\n");
        }
        printf("    esac\n"
               "    if [[ $cur == -* ]]; then\n"
               "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
               "        return\n"
               "    fi\n\n");
}

/* The command's words, and a sandbox name as its first argument. */
static void put_words(void) {
        bool first = true;

        printf("    if [[ -z $noun ]]; then\n"
               "        COMPREPLY=($(compgen -W '");
        for (size_t i = 0; i < ctl_n_verbs; i++)
                if (!noun_seen(i))
                        printf("%s%.*s", i ? " " : "", noun_len(ctl_verbs[i].words), ctl_verbs[i].words);
        printf("' -- \"$cur\"))\n"
               "    elif [[ -z $verb ]]; then\n"
               "        case $noun in\n");
        for (size_t i = 0; i < ctl_n_verbs; i++) {
                const char *noun = ctl_verbs[i].words;

                if (noun_seen(i) || !ctl_second_word(noun))
                        continue;
                printf("            %.*s) COMPREPLY=($(compgen -W '", noun_len(noun), noun);
                for (size_t k = i, n = 0; k < ctl_n_verbs; k++)
                        if (noun_len(ctl_verbs[k].words) == noun_len(noun) &&
                            strncmp(ctl_verbs[k].words, noun, (size_t) noun_len(noun)) == 0)
                                printf("%s%s", n++ ? " " : "", ctl_second_word(ctl_verbs[k].words));
                printf("' -- \"$cur\")) ;;\n");
        }
        printf("        esac\n"
               "    elif ((nargs == 0)); then\n"
               "        case $noun/$verb in\n"
               "            ");
        for (size_t i = 0; i < ctl_n_verbs; i++) {
                const CtlVerb *v = &ctl_verbs[i];

                if (!(v->flags & CTL_SANDBOX_ARG))
                        continue;
                printf("%s%.*s/%s", first ? "" : " | ", noun_len(v->words), v->words, ctl_second_word(v->words) ?: "");
                first = false;
        }
        printf(")\n"
               "                COMPREPLY=($(compgen -W \"$(_sbxctl_sandboxes)\" -- \"$cur\")) ;;\n");
        for (size_t i = 0; i < ctl_n_verbs; i++)
                if (ctl_verbs[i].flags & CTL_OWNER_ARG)
                        printf("            %.*s/%s) COMPREPLY=($(compgen -u -- \"$cur\")) ;;\n",
                               noun_len(ctl_verbs[i].words), ctl_verbs[i].words,
                               ctl_second_word(ctl_verbs[i].words) ?: "");
        printf("        esac\n"
               "    fi\n");
}

static int list(void) {
        for (size_t i = 0; i < ctl_n_verbs; i++)
                printf("%s\n", ctl_verbs[i].words);
        for (size_t i = 0; i < ctl_n_options; i++)
                printf("%s\n", ctl_options[i].name);
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

int main(int argc, char *argv[]) {
        if (argc == 2 && strcmp(argv[1], "--list") == 0)
                return list();
        if (argc != 1) {
                fprintf(stderr, "Usage: sbxctl-completion [--list]\n");
                return 2;
        }
        printf("# bash completion for sbxctl(8)                             -*- shell-script -*-\n"
               "# Generated from sbxctl's command and option tables by sbxctl-completion\n"
               "# (supervisor/sbxctl-completion.c); installed as\n"
               "# share/bash-completion/completions/sbxctl. Sandbox names are completed from\n"
               "# `sbxctl sandbox list --json` when sbxd is reachable.\n"
               "\n"
               "_sbxctl_sandboxes()\n"
               "{\n"
               "    local sock=()\n"
               "    [[ -n ${_sbxctl_socket-} ]] && sock=(--socket \"$_sbxctl_socket\")\n"
               "    sbxctl \"${sock[@]}\" sandbox list --json 2>/dev/null |\n"
               "        sed -n 's/^ *\"name\": \"\\(.*\\)\",\\{0,1\\}$/\\1/p'\n"
               "}\n"
               "\n"
               "_sbxctl()\n"
               "{\n"
               "    local cur prev words cword\n"
               "    _init_completion || return\n"
               "\n");
        put_scan();
        put_values();
        put_options();
        put_words();
        printf("} &&\n"
               "    complete -F _sbxctl sbxctl\n"
               "\n"
               "# ex: filetype=sh\n");
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
