# sandbox-mcp; the *_LIB_ sources are also linked into unit tests.
BROKER_SRCS += broker/broker.c
BROKER_LIB_SRCS += broker/jsonrpc.c
BROKER_LIB_SRCS += broker/jsonwrite.c
BROKER_LIB_SRCS += broker/mcp.c
BROKER_LIB_SRCS += broker/session.c
BROKER_LIB_SRCS += broker/schema.c
BROKER_LIB_SRCS += broker/tools.c
BROKER_LIB_SRCS += broker/tool-args.c
BROKER_LIB_SRCS += broker/tool-render.c
BROKER_LIB_SRCS += broker/tool-schemas.c
BROKER_LIB_SRCS += broker/digest.c
BROKER_LIB_SRCS += broker/boxsync.c
BROKER_LIB_SRCS += broker/boxes-files.c
# one line per tool set (broker/tools.h: TOOL_SETS)
BROKER_LIB_SRCS += broker/set-runtime.c
BROKER_LIB_SRCS += broker/set-sessions.c
BROKER_LIB_SRCS += broker/set-lifecycle.c
BROKER_LIB_SRCS += broker/set-script.c
BROKER_LIB_SRCS += broker/set-artifacts.c
BROKER_LIB_SRCS += broker/set-boxes.c
BROKER_LIB_SRCS += broker/set-boxes-b.c
