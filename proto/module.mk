PROTO_SRCS += proto/wire.c
PROTO_SRCS += proto/setup.c
