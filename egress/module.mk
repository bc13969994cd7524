# sbx-egress (sbx-egress(8)): the sandboxes' HTTP proxy, an unprivileged
# process of its own that shares only common/ and proto/ with sbxd.
EGRESS_SRCS += egress/sbx-egress.c
EGRESS_LIB_SRCS += egress/proxy.c
EGRESS_LIB_SRCS += egress/request.c
EGRESS_LIB_SRCS += egress/addr.c
