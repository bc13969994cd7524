#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/egress.h"
#include "fd-util.h"
#include "macro.h"

/* The host of an http:// or https:// URL (len bytes at url; apt's
 * "mirror+http://" and "tor+https://" included); other schemes add nothing. */
static int hosts_add_url(EgressHosts *hosts, const char *url, size_t len) {
        const char *end = url + len, *scheme_end = memchr(url, ':', len), *plus, *host, *at;
        char name[SBX_EGRESS_HOST_MAX + 1];
        uint16_t port;
        size_t n;

        if (!scheme_end || end - scheme_end < 3 || strncmp(scheme_end, "://", 3) != 0)
                return 0;
        plus = memchr(url, '+', (size_t) (scheme_end - url));
        if (plus)
                url = plus + 1;
        if (!((scheme_end - url == 4 && strncasecmp(url, "http", 4) == 0) ||
              (scheme_end - url == 5 && strncasecmp(url, "https", 5) == 0)))
                return 0;
        host = scheme_end + 3;
        n = MIN(strcspn(host, "/?#"), (size_t) (end - host));
        at = memchr(host, '@', n);
        if (at) {
                n -= (size_t) (at + 1 - host);
                host = at + 1;
        }
        if (egress_host_port_parse(host, n, name, &port) < 0)
                return 0;               /* a malformed URL in the host's configuration: not a host to allow */
        return egress_hosts_add(hosts, name, strlen(name), port);
}

/* Each whitespace-separated word of line that is a URL. */
static int hosts_add_urls(EgressHosts *hosts, const char *line) {
        for (const char *p = line;;) {
                size_t n;
                int r;

                p += strspn(p, " \t\r");
                n = strcspn(p, " \t\r\n");
                if (n == 0)
                        return 0;
                r = hosts_add_url(hosts, p, n);
                if (r < 0)
                        return r;
                p += n;
        }
}

/* The lines of a file below rootfd, each to cb; a missing or unreadable file has none. */
static int file_lines(int rootfd, const char *path, int (*cb)(EgressHosts *, char *line, bool *state),
                      EgressHosts *hosts) {
        _cleanup_free_ char *text = NULL;
        bool state = false;
        char *save = NULL;

        if (read_file_bounded_at(rootfd, path, SBX_EGRESS_CONFIG_FILE_MAX, &text, NULL) < 0)
                return 0;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                int r = cb(hosts, l, &state);

                if (r < 0)
                        return r;
        }
        return 0;
}

/* sources.list: "deb [options] URI suite components" and deb-src. */
static int apt_list_line(EgressHosts *hosts, char *line, bool *state _unused_) {
        char *p = line + strspn(line, " \t");

        if (strncmp(p, "deb", 3) != 0)
                return 0;
        p += 3;
        if (strncmp(p, "-src", 4) == 0)
                p += 4;
        if (*p != ' ' && *p != '\t')
                return 0;
        p += strspn(p, " \t");
        if (*p == '[') {
                p = strchr(p, ']');
                if (!p)
                        return 0;
                p++;
        }
        p += strspn(p, " \t");
        return hosts_add_url(hosts, p, strcspn(p, " \t\r"));
}

/* deb822 *.sources: the URIs field, continuation lines included; state
 * says the line before was part of it. Enabled: no is not read (a stanza
 * that says it comes after its URIs; apt's own default is yes). */
static int apt_sources_line(EgressHosts *hosts, char *line, bool *state) {
        if (*state && (line[0] == ' ' || line[0] == '\t'))
                return hosts_add_urls(hosts, line);
        *state = strncasecmp(line, "URIs:", 5) == 0;
        return *state ? hosts_add_urls(hosts, line + 5) : 0;
}

/* npmrc: registry=URL and @scope:registry=URL (ini, ; and # comments). */
static int npmrc_line(EgressHosts *hosts, char *line, bool *state _unused_) {
        char *p = line + strspn(line, " \t"), *eq = strchr(p, '=');
        size_t k;

        if (!eq || *p == ';' || *p == '#')
                return 0;
        for (k = (size_t) (eq - p); k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t'); k--)
                ;
        if (!((k == 8 && strncmp(p, "registry", 8) == 0) ||
              (k > 10 && p[0] == '@' && strncmp(p + k - 9, ":registry", 9) == 0)))
                return 0;
        return hosts_add_urls(hosts, eq + 1);
}

/* pip.conf: index-url and extra-index-url (also with '_'), whose values
 * may go on over indented lines. */
static int pip_line(EgressHosts *hosts, char *line, bool *state) {
        char *p, *eq;
        size_t k;

        if (*state && (line[0] == ' ' || line[0] == '\t'))
                return hosts_add_urls(hosts, line);
        *state = false;
        p = line + strspn(line, " \t");
        eq = strpbrk(p, "=:");
        if (!eq || *p == ';' || *p == '#' || *p == '[')
                return 0;
        for (k = (size_t) (eq - p); k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\t'); k--)
                ;
        if (!((k == 9 && (strncmp(p, "index-url", 9) == 0 || strncmp(p, "index_url", 9) == 0)) ||
              (k == 15 && (strncmp(p, "extra-index-url", 15) == 0 || strncmp(p, "extra_index_url", 15) == 0))))
                return 0;
        *state = true;
        return hosts_add_urls(hosts, eq + 1);
}

static bool name_ends_with(const char *name, const char *suffix) {
        size_t n = strlen(name), s = strlen(suffix);

        return n > s && strcmp(name + n - s, suffix) == 0;
}

static int apt_sources_dir(EgressHosts *hosts, int rootfd) {
        static const char dir[] = "etc/apt/sources.list.d";
        _cleanup_close_ int fd = openat2_fd(rootfd, dir, O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        _cleanup_(closedirp) DIR *d = NULL;
        unsigned files = 0;
        struct dirent *de;

        if (fd < 0)
                return 0;
        d = opendir_at(fd);
        if (!d)
                return 0;
        while ((de = readdir(d)) && files < SBX_EGRESS_CONFIG_FILES_MAX) {
                bool list = name_ends_with(de->d_name, ".list"), deb822 = name_ends_with(de->d_name, ".sources");
                int r;

                if (de->d_name[0] == '.' || (!list && !deb822))
                        continue;
                files++;
                r = file_lines(fd, de->d_name, list ? apt_list_line : apt_sources_line, hosts);
                if (r < 0)
                        return r;
        }
        return 0;
}

int egress_hosts_discover(EgressHosts *hosts, int rootfd) {
        static const struct {
                const char *path;
                int (*line)(EgressHosts *, char *, bool *);
        } files[] = {
                { "etc/apt/sources.list", apt_list_line },
                { "etc/npmrc", npmrc_line },
                { "usr/etc/npmrc", npmrc_line },
                { "etc/pip.conf", pip_line },
                { "etc/xdg/pip/pip.conf", pip_line },
        };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                r = file_lines(rootfd, files[i].path, files[i].line, hosts);
                if (r < 0)
                        return r;
        }
        return apt_sources_dir(hosts, rootfd);
}


int egress_audit_add(EgressAudit *a, const char *target, bool allowed) {
        char **list = allowed ? a->contacted : a->refused;
        size_t *n = allowed ? &a->n_contacted : &a->n_refused;

        for (size_t i = 0; i < *n; i++)
                if (strcmp(list[i], target) == 0)
                        return 0;
        if (*n >= SBX_EGRESS_AUDIT_MAX) {
                a->truncated = true;
                return 0;
        }
        list[*n] = strdup(target);
        if (!list[*n])
                return -ENOMEM;
        (*n)++;
        return 0;
}

void egress_audit_done(EgressAudit *a) {
        for (size_t i = 0; i < a->n_contacted; i++)
                free(a->contacted[i]);
        for (size_t i = 0; i < a->n_refused; i++)
                free(a->refused[i]);
        *a = (EgressAudit) {};
}

void egress_audit_view(const EgressAudit *a, EgressPolicy policy, Sbx__EgressAudit *ret) {
        sbx__egress_audit__init(ret);
        ret->policy = (char *) egress_policy_to_string(policy);
        ret->contacted = (char **) a->contacted;
        ret->n_contacted = a->n_contacted;
        ret->refused = (char **) a->refused;
        ret->n_refused = a->n_refused;
        ret->truncated = a->truncated;
}

bool egress_verdict_check(const Sbx__EgressVerdict *v) {
        size_t key = strlen(v->key), target = strlen(v->target);

        return key > 0 && key < 48 && strspn(v->key, "abcdefghijklmnopqrstuvwxyz0123456789-") == key && target > 2 &&
               target <= SBX_EGRESS_HOST_MAX + 8 && strchr(v->target, ':') &&
               strspn(v->target, "abcdefghijklmnopqrstuvwxyz0123456789-._:[]") == target && strlen(v->reason) < 200;
}

const char *const egress_proxy_env[EGRESS_PROXY_ENV_N] = {
        "http_proxy=" EGRESS_PROXY_URL,    "https_proxy=" EGRESS_PROXY_URL,
        "HTTP_PROXY=" EGRESS_PROXY_URL,    "HTTPS_PROXY=" EGRESS_PROXY_URL,
        "no_proxy=localhost,127.0.0.1",    "npm_config_proxy=" EGRESS_PROXY_URL,
        "npm_config_https_proxy=" EGRESS_PROXY_URL, "PIP_PROXY=" EGRESS_PROXY_URL,
        "NO_PROXY=localhost,127.0.0.1",
};
