#include <errno.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "netns.h"

int netns_loopback_up(void) {
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
