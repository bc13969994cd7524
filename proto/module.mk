PROTO_SRCS += proto/wire.c
PROTO_SRCS += proto/setup.c
PROTO_SRCS += proto/msg.c
PROTO_SRCS += proto/msg-json.c
