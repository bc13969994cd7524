#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "os/netns.h"

static int netns_loopback_up(void) {
        struct nl_sock *sk;
        struct rtnl_link *lo = NULL, *change = NULL;
        int r;

        sk = nl_socket_alloc();
        if (!sk)
                return -ENOMEM;
        r = nl_connect(sk, NETLINK_ROUTE);
        if (r < 0) {
                r = -EIO;
                goto out;
        }
        r = rtnl_link_get_kernel(sk, 0, "lo", &lo);
        if (r < 0) {
                r = -ENODEV;
                goto out;
        }
        change = rtnl_link_alloc();
        if (!change) {
                r = -ENOMEM;
                goto out;
        }
        rtnl_link_set_flags(change, IFF_UP);
        r = rtnl_link_change(sk, lo, change, 0) < 0 ? -EIO : 0;
out:
        rtnl_link_put(change);
        rtnl_link_put(lo);
        nl_socket_free(sk);
        return r;
}

int netns_listen_loopback(int netns_fd, int home_fd, uint16_t port, int *ret) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd, r = 0, one = 1;

        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0)
                r = -errno;
        /* Back home whatever happened, as above. */
        if (setns(home_fd, CLONE_NEWNET) < 0 && r >= 0)
                r = -errno;
        if (r < 0) {
                if (fd >= 0)
                        (void) close(fd);
                return r;
        }
        *ret = fd;
        return 0;
}

int netns_new_with_loopback(int home_fd, int *ret) {
        int fd, r;

        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        r = netns_loopback_up();
        fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (fd < 0 && r >= 0)
                r = -errno;
        /* Back home whatever happened: the caller's later sockets must not land in it. */
        if (setns(home_fd, CLONE_NEWNET) < 0) {
                if (fd >= 0)
                        (void) close(fd);
                return -errno;
        }
        if (r < 0) {
                if (fd >= 0)
                        (void) close(fd);
                return r;
        }
        *ret = fd;
        return 0;
}
