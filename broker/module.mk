# sandbox-mcp; the *_LIB_ sources are also linked into unit tests.
BROKER_SRCS += broker/broker.c
BROKER_LIB_SRCS += broker/jsonrpc.c
BROKER_LIB_SRCS += broker/jsonwrite.c
BROKER_LIB_SRCS += broker/mcp.c
BROKER_LIB_SRCS += broker/schema.c
BROKER_LIB_SRCS += broker/tools.c
