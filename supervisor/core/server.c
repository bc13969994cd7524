#include <errno.h>
#include <sys/epoll.h>

#include "core/server.h"
#include "macro.h"

int server_watch(Server *s, EventSource *src, int fd, uint32_t events) {
        src->fd = fd;
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = events, .data.ptr = src }) < 0) {
                src->fd = -EBADF;
                return -errno;
        }
        return 0;
}

int server_rewatch(Server *s, EventSource *src, uint32_t events) {
        return RET_NERRNO(epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, src->fd,
                                    &(struct epoll_event){ .events = events, .data.ptr = src }));
}

void server_unwatch(Server *s, EventSource *src) {
        if (src->fd < 0)
                return;
        (void) epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, src->fd, NULL);
        src->fd = safe_close(src->fd);
}
