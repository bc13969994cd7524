COMMON_SRCS += common/log.c
COMMON_SRCS += common/fd-util.c
COMMON_SRCS += common/json-escape.c
COMMON_SRCS += common/array.c
COMMON_SRCS += common/utf8.c
COMMON_SRCS += common/memfd-util.c
COMMON_SRCS += common/base64.c
COMMON_SRCS += common/workpool.c
