#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/boxwire.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

/* A wired name's line ends in "\t<service>\t" WIRE_TAG "<mode>". */
#define WIRE_TAG "# sbx-wire "

static const char *wire_needle(const char *service, char *buf, size_t size) {
        snprintf(buf, size, "\t%s\t" WIRE_TAG, service);
        return buf;
}

const char *box_wired_mode(const char *hosts, const char *service) {
        char buf[SBX_NAME_MAX + 32];
        const char *needle = wire_needle(service, buf, sizeof(buf)), *at = strstr(hosts, needle);

        if (!at)
                return "";
        at += strlen(needle);
        if (strncmp(at, "box", 3) == 0)
                return "box";
        return strncmp(at, "external", 8) == 0 ? "external" : "";
}

char *box_no_proxy(const Box *box, const char *hosts) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return NULL;
        fputs("localhost,127.0.0.1", f);
        for (size_t i = 0; i < box->n_services; i++)
                if (strcmp(box_wired_mode(hosts, box->services[i]->name), "box") == 0)
                        fprintf(f, ",%s", box->services[i]->name);
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

char *box_hosts_wired(const char *hosts, const char *service, const char *mode) {
        _cleanup_free_ char *out = NULL;
        char buf[SBX_NAME_MAX + 32];
        const char *needle = wire_needle(service, buf, sizeof(buf));
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return NULL;
        for (const char *line = hosts; *line;) {
                size_t n = strcspn(line, "\n");

                if (!memmem(line, n, needle, strlen(needle)))
                        fprintf(f, "%.*s\n", (int) n, line);
                line += n + (line[n] == '\n');
        }
        /* External: a comment, so that the box resolves nothing for it and its clients ask the proxy. */
        fprintf(f, "%s\t%s\t" WIRE_TAG "%s\n", strcmp(mode, "box") == 0 ? "127.0.0.1" : "#", service, mode);
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(out);
}

int box_url_target(const char *url, char *host, uint16_t *ret_port) {
        bool tls = strncmp(url, "https://", 8) == 0;
        const char *h = url + (tls ? 8 : 7), *end, *port = NULL;
        unsigned long p = tls ? 443 : 80;
        size_t n;

        if (!tls && strncmp(url, "http://", 7) != 0)
                return -EINVAL;
        if (*h == '[') {
                end = strchr(++h, ']');
                if (!end)
                        return -EINVAL;
                n = (size_t) (end - h);
                if (n == 0 || strspn(h, "0123456789abcdefABCDEF:.") < n)
                        return -EINVAL;
                port = end[1] == ':' ? end + 2 : NULL;
                end++;
        } else {
                n = strcspn(h, ":/?#");
                if (n == 0 || strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") < n)
                        return -EINVAL; /* userinfo (@) and other bytes too */
                end = h + n;
                port = *end == ':' ? end + 1 : NULL;
        }
        if (n > SBX_EGRESS_HOST_MAX)
                return -EINVAL;
        if (port) {
                char *e;

                errno = 0;
                p = strtoul(port, &e, 10);
                if (errno || e == port || p < 1 || p > 65535 || (*e && !strchr("/?#", *e)))
                        return -EINVAL;
        } else if (*end && !strchr("/?#", *end)) {
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                host[i] = (char) tolower((unsigned char) h[i]);
        host[n] = '\0';
        *ret_port = (uint16_t) p;
        return 0;
}

int box_hosts_read(const WorkspaceSession *ws, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = 0;

        fd = openat2_fd(ws->root_fd, "etc/hosts", O_RDONLY | O_NOFOLLOW, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        return read_fd_bounded(fd, BOX_WIRE_HOSTS_MAX, ret, &len);
}

/* ws's box, or NULL. */
static Box *box_of_session(Server *s, const WorkspaceSession *ws) {
        Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                if (box_session(s, box) == ws)
                        return box;
        return NULL;
}

/* One allocation: the pointers, the aliases, then the host. */
typedef struct AliasBlock {
        Sbx__EgressAlias *ptrs[SBX_BOX_SERVICES_MAX];
        Sbx__EgressAlias aliases[SBX_BOX_SERVICES_MAX];
        char host[SBX_EGRESS_HOST_MAX + 1];
} AliasBlock;

int box_egress_aliases(Server *s, const WorkspaceSession *ws, Sbx__EgressAlias ***ret, size_t *ret_n) {
        _cleanup_free_ char *hosts = NULL;
        _cleanup_free_ AliasBlock *b = NULL;
        Box *box = box_of_session(s, ws);
        uint16_t port;
        size_t n = 0;
        int r;

        *ret = NULL;
        *ret_n = 0;
        if (!box || !box->external_base_url[0])
                return 0;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        if (box_url_target(box->external_base_url, b->host, &port) < 0)
                return 0;
        r = box_hosts_read(ws, &hosts);
        if (r < 0)
                return r;
        for (size_t i = 0; i < box->n_services && i < SBX_BOX_SERVICES_MAX; i++) {
                if (strcmp(box_wired_mode(hosts, box->services[i]->name), "external") != 0)
                        continue;
                b->aliases[n] = (Sbx__EgressAlias) SBX__EGRESS_ALIAS__INIT;
                b->aliases[n].name = box->services[i]->name;
                b->aliases[n].port = box->services[i]->port;
                b->aliases[n].host = b->host;
                b->aliases[n].to_port = port;
                b->ptrs[n] = &b->aliases[n];
                n++;
        }
        if (n == 0)
                return 0;
        /* ptrs is the block's first member: freeing *ret frees it all. */
        *ret = TAKE_PTR(b)->ptrs;
        *ret_n = n;
        return 0;
}
