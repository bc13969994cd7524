PROTO_SRCS += proto/wire.c
